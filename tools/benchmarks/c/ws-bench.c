/* The reference WebSocket client for `tools/bench session`: libwebsockets
 * (Debian's libwebsockets-dev), one connection, no extensions.
 *
 *   ws-bench echo <port> <messages> <size>   send a binary message of <size>
 *                                            bytes, wait for its echo, N times
 *   ws-bench one <port> <size>               one message of <size> bytes
 *                                            (sent in 64 KiB fragments), echoed
 *
 * Prints: <elapsed seconds> <cpu seconds> <peak rss KiB> <bytes received>
 */
#include <libwebsockets.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define FRAGMENT (64 * 1024)

static size_t message_size;
static long messages_left;
static size_t sent_of_message;
static size_t received_of_message;
static size_t bytes_total;
static int failed;
static int done;
static double start;
static double cpu_start;
static unsigned char *buffer;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static long peak_rss_kib(void) {
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (status && fgets(line, sizeof line, status)) {
        if (strncmp(line, "VmHWM:", 6) == 0) { kib = atol(line + 6); break; }
    }
    if (status) fclose(status);
    return kib;
}

static double cpu_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
    (void)user; (void)in;
    switch (reason) {
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        start = now();
        cpu_start = cpu_seconds();
        sent_of_message = 0;
        received_of_message = 0;
        lws_callback_on_writable(wsi);
        break;
    case LWS_CALLBACK_CLIENT_WRITEABLE: {
        if (sent_of_message >= message_size) break;
        size_t piece = message_size - sent_of_message;
        if (piece > FRAGMENT) piece = FRAGMENT;
        int flags = lws_write_ws_flags(LWS_WRITE_BINARY, sent_of_message == 0, sent_of_message + piece == message_size);
        if (lws_write(wsi, buffer + LWS_PRE, piece, (enum lws_write_protocol)flags) < (int)piece) {
            failed = 1;
            return -1;
        }
        sent_of_message += piece;
        if (sent_of_message < message_size) lws_callback_on_writable(wsi);
        break;
    }
    case LWS_CALLBACK_CLIENT_RECEIVE:
        received_of_message += len;
        bytes_total += len;
        if (lws_is_final_fragment(wsi) && received_of_message >= message_size) {
            if (--messages_left == 0) {
                done = 1;
                return -1;
            }
            sent_of_message = 0;
            received_of_message = 0;
            lws_callback_on_writable(wsi);
        }
        break;
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        fprintf(stderr, "ws-bench: %s\n", in ? (const char *)in : "connection error");
        failed = 1;
        break;
    case LWS_CALLBACK_CLIENT_CLOSED:
        if (!done) failed = 1;
        break;
    default:
        break;
    }
    return 0;
}

static const struct lws_protocols protocols[] = {
    { "bench", callback, 0, FRAGMENT, 0, NULL, FRAGMENT },
    { NULL, NULL, 0, 0, 0, NULL, 0 },
};

int main(int argc, char **argv) {
    int echo = argc == 5 && strcmp(argv[1], "echo") == 0;
    int one = argc == 4 && strcmp(argv[1], "one") == 0;
    if (!echo && !one) {
        fprintf(stderr, "usage: ws-bench echo PORT MESSAGES SIZE | one PORT SIZE\n");
        return 2;
    }
    int port = atoi(argv[2]);
    messages_left = echo ? atol(argv[3]) : 1;
    message_size = (size_t)atol(argv[echo ? 4 : 3]);
    if (port <= 0 || port > 65535 || messages_left <= 0 || message_size == 0 || message_size > ((size_t)1 << 30)) {
        fprintf(stderr, "ws-bench: bad arguments\n");
        return 2;
    }
    buffer = malloc(LWS_PRE + message_size);
    if (!buffer) return 1;
    for (size_t i = 0; i < message_size; i++) buffer[LWS_PRE + i] = (unsigned char)(i * 31);
    lws_set_log_level(LLL_ERR, NULL);

    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = protocols;
    struct lws_context *context = lws_create_context(&info);
    if (!context) return 1;

    struct lws_client_connect_info connect;
    memset(&connect, 0, sizeof connect);
    connect.context = context;
    connect.address = "127.0.0.1";
    connect.port = port;
    connect.path = "/";
    connect.host = "127.0.0.1";
    connect.origin = "127.0.0.1";
    connect.protocol = NULL;
    connect.local_protocol_name = "bench";
    if (!lws_client_connect_via_info(&connect)) return 1;
    while (!done && !failed) lws_service(context, 0);
    double elapsed = now() - start;
    double cpu = cpu_seconds() - cpu_start;
    lws_context_destroy(context);
    if (failed) {
        fprintf(stderr, "ws-bench: failed\n");
        return 1;
    }
    printf("%f %f %ld %zu\n", elapsed, cpu, peak_rss_kib(), bytes_total);
    return 0;
}
