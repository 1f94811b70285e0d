#include "transport.h"

#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

static ssize_t plain_read(struct mh_transport *t, void *buf, size_t len)
{
    return read(t->fd, buf, len);
}

static ssize_t plain_write(struct mh_transport *t, const void *buf, size_t len)
{
    return send(t->fd, buf, len, MSG_NOSIGNAL);
}

static void plain_shutdown(struct mh_transport *t)
{
    shutdown(t->fd, SHUT_WR);
}

static void plain_close(struct mh_transport *t)
{
    close(t->fd);
    t->fd = -1;
}

static bool plain_pending(const struct mh_transport *t)
{
    (void)t;
    return false;
}

/* sendmsg rather than writev: MSG_NOSIGNAL, as send. */
static ssize_t plain_writev(struct mh_transport *t, const struct iovec *iov, int iovcnt)
{
    struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
    return sendmsg(t->fd, &m, MSG_NOSIGNAL);
}

static ssize_t plain_sendfile(struct mh_transport *t, int in_fd, off_t *off, size_t len)
{
    return sendfile(t->fd, in_fd, off, len);
}

static const struct mh_transport_ops plain_ops = {
    .name = "tcp",
    .read = plain_read,
    .write = plain_write,
    .shutdown = plain_shutdown,
    .close = plain_close,
    .pending = plain_pending,
    .writev = plain_writev,
    .sendfile = plain_sendfile,
};

void mh_transport_plain_init(struct mh_transport *t, int fd)
{
    t->ops = &plain_ops;
    t->fd = fd;
    t->wants = 0;
    t->_impl = NULL;
}
