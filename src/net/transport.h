#ifndef MH_TRANSPORT_H
#define MH_TRANSPORT_H
/*
 * The byte stream under a connection: plain TCP here, TLS in tls.c. The
 * connection state machine calls through this vtable and never touches the
 * socket's data directly (it still owns the fd for its io watcher).
 *
 * read and write follow read(2)/send(2): a byte count, 0 for EOF (read), or
 * -1 with errno set; EAGAIN means "try again when the socket is ready".
 * Which readiness that is can differ from the operation's own direction: a
 * TLS read may have to finish writing a handshake flight first. The
 * transport then sets MH_TRANSPORT_READ_WANTS_WRITE (or the converse) in
 * `wants`, and the caller waits for that event instead.
 *
 * A transport may hold input it has already taken off the socket (TLS
 * decrypts a whole record while the caller asked for less): `pending` says
 * so, and the caller must read again without waiting for the socket.
 */
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct mh_transport;

struct mh_transport_ops {
    const char *name;
    ssize_t (*read)(struct mh_transport *t, void *buf, size_t len);
    /* Writes a prefix of buf. After EAGAIN, the next call must start with the same bytes. */
    ssize_t (*write)(struct mh_transport *t, const void *buf, size_t len);
    /* Ends the write side (TLS: close_notify first), keeping the read side open. */
    void (*shutdown)(struct mh_transport *t);
    /* Closes the socket and releases per-connection state. */
    void (*close)(struct mh_transport *t);
    /* Input is buffered inside the transport: read without waiting for the socket. */
    bool (*pending)(const struct mh_transport *t);
    /*
     * Optional (NULL: not supported; the caller copies into a buffer and
     * calls write). writev: gathers iov like writev(2). sendfile: sends up
     * to len bytes of in_fd from *off, advancing *off, like sendfile(2).
     * Both follow write's EAGAIN and `wants` rules.
     */
    ssize_t (*writev)(struct mh_transport *t, const struct iovec *iov, int iovcnt);
    ssize_t (*sendfile)(struct mh_transport *t, int in_fd, off_t *off, size_t len);
    /*
     * Optional: the application protocol the handshake negotiated (ALPN:
     * "h2", "http/1.1"), "" when none was (or the handshake is not done).
     * NULL (the op or its result): a transport that negotiates nothing
     * (plain TCP), where the bytes alone tell the protocol.
     */
    const char *(*alpn)(const struct mh_transport *t);
};

enum {
    MH_TRANSPORT_READ_WANTS_WRITE = 1, /* the last read got EAGAIN for lack of socket writability */
    MH_TRANSPORT_WRITE_WANTS_READ = 2, /* the last write got EAGAIN for lack of socket input */
};

struct mh_transport {
    const struct mh_transport_ops *ops;
    int fd;
    unsigned wants; /* MH_TRANSPORT_* flags, set by the last read/write */
    void *_impl;    /* implementation state (a TLS session) */
};

/* Plain TCP over fd (non-blocking). */
void mh_transport_plain_init(struct mh_transport *t, int fd);

static inline ssize_t mh_transport_read(struct mh_transport *t, void *buf, size_t len)
{
    return t->ops->read(t, buf, len);
}

static inline ssize_t mh_transport_write(struct mh_transport *t, const void *buf, size_t len)
{
    return t->ops->write(t, buf, len);
}

static inline void mh_transport_shutdown(struct mh_transport *t)
{
    t->ops->shutdown(t);
}

static inline void mh_transport_close(struct mh_transport *t)
{
    t->ops->close(t);
}

static inline bool mh_transport_pending(const struct mh_transport *t)
{
    return t->ops->pending(t);
}

static inline const char *mh_transport_alpn(const struct mh_transport *t)
{
    return t->ops->alpn ? t->ops->alpn(t) : NULL;
}

#endif
