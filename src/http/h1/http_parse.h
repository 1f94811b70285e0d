#ifndef MH_HTTP_PARSE_H
#define MH_HTTP_PARSE_H
/*
 * llhttp glue: callbacks that fill the HTTP/1 connection's request head with
 * slices, enforce the head and body limits, and pause the parser at the end
 * of each head and each message so pipelined requests are taken one at a time.
 */
struct mh_h1;

enum mh_parse_result {
    MH_PARSE_NEED_MORE,    /* all buffered bytes consumed */
    MH_PARSE_HEAD_DONE,    /* a request head is complete */
    MH_PARSE_MESSAGE_DONE, /* a request (head and body) is complete */
    MH_PARSE_ERROR,        /* *status: the response to send (0 = just close) */
};

/* Prepares the connection's parser (once per connection). */
void mh_http_parser_init(struct mh_h1 *c);

/* Parses from c->parse_pos to the end of c->in and advances parse_pos. */
enum mh_parse_result mh_http_parse(struct mh_h1 *c, int *status);

#endif
