/*
 * The address a tool's HTTP listener was bound to, as the kernel bound it
 * (port 0 in --listen: the port it chose), printed on stdout for whoever
 * started the tool (rjq serve, rjq-pg-bridge --listen; the tests read it).
 */
#ifndef RJQ_TOOLS_LISTEN_H
#define RJQ_TOOLS_LISTEN_H

/* Print "<what> ADDR:PORT" ("<what> [ADDR]:PORT" for IPv6) of the
 * listening socket fd and flush stdout; "?" and port when the socket
 * cannot tell. */
void listen_print_bound(const char *what, int fd, int port);

#endif
