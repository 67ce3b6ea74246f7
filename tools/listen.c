/* The bound address of a tool's listener (listen.h). */
#include "listen.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>

void listen_print_bound(const char *what, int fd, int port) {
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    char shown[INET6_ADDRSTRLEN] = "?";
    int v6 = 0;
    if (getsockname(fd, (struct sockaddr *)&got, &gl) == 0) {
        v6 = got.ss_family == AF_INET6;
        if (v6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&got)->sin6_addr, shown, sizeof shown);
            port = ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
        } else {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&got)->sin_addr, shown, sizeof shown);
            port = ntohs(((struct sockaddr_in *)&got)->sin_port);
        }
    }
    printf(v6 ? "%s [%s]:%d\n" : "%s %s:%d\n", what, shown, port);
    fflush(stdout);
}
