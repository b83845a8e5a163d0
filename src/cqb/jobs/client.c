/* The compiled job client (docs/jobs.md): what cqb.jobs.client.forward does
 * for a `cqb run` job, without starting Python.
 *
 *     $CQB_RUN_CLIENT run --policy ... --out FILE 2> LOG
 *
 * connects to the socket in $CQB_RUN_SERVER, sends one JSON message
 * {"argv", "cwd", "env", "umask"} with fds 1 and 2 (SCM_RIGHTS) and waits for
 * the server's replies: "started" (the forked run is about to start), the
 * run's 4-byte big-endian exit status, which it exits with, and "ended" (the
 * run's log is complete) or the connection's close. Where no server
 * took the run (no variable, no socket, a request it cannot send, a refusal,
 * or no "started" before the server went away) it execs the Python command
 * instead, $CQB_RUN_FALLBACK or else `cqb` on PATH, with the same arguments
 * and without $CQB_RUN_SERVER: the run then happens in that process, as
 * without a server. A connection closed after "started" without a status
 * means the worker that held it has exited, its run with it: the same fallback
 * runs the job again, with $CQB_STALE_SWEPT unset so that it removes the dead
 * run's temporary. Any other failure to read the status is exit 75 (the run
 * may still be going: it must not run twice). The package build (setup.py) compiles
 * this file with its own SHA-256 as CLIENT_SOURCE_HASH, printed by
 * `--source-hash`, so that a client older than this source is not used.
 * Standard C and POSIX only.
 *
 * A killed client kills its run: the server kills the forked child when the
 * job's connection closes, which the kernel does when this process dies.
 * Signal dispositions are left as inherited, as the Python client leaves them.
 */

#define _DEFAULT_SOURCE /* CMSG_SPACE, CMSG_LEN (glibc) */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#define RUN_SERVER_VARIABLE "CQB_RUN_SERVER"
#define RUN_FALLBACK_VARIABLE "CQB_RUN_FALLBACK"
#define STALE_SWEPT_VARIABLE "CQB_STALE_SWEPT" /* cqb.jobs.client.STALE_SWEPT_VARIABLE */
#define REQUEST_LIMIT (1 << 20) /* cqb.jobs.client.REQUEST_LIMIT: what the server reads */
#define REPLY_LIMIT 4096
#define STARTED "started"        /* cqb.jobs.client.STARTED */
#define REFUSED "refused: "      /* cqb.jobs.client.REFUSED */
#define LOST_AFTER_START 75      /* cqb.jobs.client.LOST_AFTER_START */
#ifndef CLIENT_SOURCE_HASH
#define CLIENT_SOURCE_HASH "unknown"
#endif

extern char **environ;

struct buffer {
    char *data;
    size_t length, capacity;
    int failed; /* out of memory, or over REQUEST_LIMIT */
};

static void append(struct buffer *out, const char *bytes, size_t count) {
    if (out->failed)
        return;
    if (out->length + count > REQUEST_LIMIT) {
        out->failed = 1;
        return;
    }
    if (out->length + count > out->capacity) {
        size_t capacity = out->capacity ? out->capacity : 16384;
        while (capacity < out->length + count)
            capacity *= 2;
        char *grown = realloc(out->data, capacity);
        if (!grown) {
            out->failed = 1;
            return;
        }
        out->data = grown;
        out->capacity = capacity;
    }
    memcpy(out->data + out->length, bytes, count);
    out->length += count;
}

static void append_text(struct buffer *out, const char *text) { append(out, text, strlen(text)); }

/* The length of the well-formed UTF-8 sequence at s (n bytes left), 0 if
 * there is none: the strict rules of Python's decoder (no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
static size_t utf8_sequence(const unsigned char *s, size_t n) {
    unsigned char lead = s[0];
    size_t length;
    unsigned char low = 0x80, high = 0xBF; /* the allowed range of the second byte */
    if (lead >= 0xC2 && lead <= 0xDF)
        length = 2;
    else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0)
            low = 0xA0;
        else if (lead == 0xED)
            high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0)
            low = 0x90;
        else if (lead == 0xF4)
            high = 0x8F;
    } else
        return 0;
    if (n < length || s[1] < low || s[1] > high)
        return 0;
    for (size_t i = 2; i < length; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return length;
}

/* A JSON string of `count` bytes of text. Valid UTF-8 passes through; a byte
 * that is not part of one becomes the lone surrogate \udcXX, which is how
 * Python decodes such bytes in argv and the environment (surrogateescape),
 * so the server's fork sees what the Python client would have sent. */
static void append_json_string(struct buffer *out, const char *text, size_t count) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)text;
    append(out, "\"", 1);
    size_t start = 0, i = 0; /* s[start:i] is pending, to be copied as it is */
    while (i < count) {
        unsigned char c = s[i];
        char escape[8];
        size_t escape_length = 0, skip = 1;
        if (c == '"' || c == '\\') {
            escape[0] = '\\';
            escape[1] = (char)c;
            escape_length = 2;
        } else if (c < 0x20) {
            memcpy(escape, "\\u00", 4);
            escape[4] = hex[c >> 4];
            escape[5] = hex[c & 15];
            escape_length = 6;
        } else if (c >= 0x80) {
            skip = utf8_sequence(s + i, count - i);
            if (!skip) {
                memcpy(escape, "\\udc", 4);
                escape[4] = hex[c >> 4];
                escape[5] = hex[c & 15];
                escape_length = 6;
                skip = 1;
            }
        }
        if (escape_length) {
            append(out, text + start, i - start);
            append(out, escape, escape_length);
            start = i + skip;
        }
        i += skip;
    }
    append(out, text + start, count - start);
    append(out, "\"", 1);
}

static char *current_folder(void) {
    size_t size = 4096;
    for (;;) {
        char *folder = malloc(size);
        if (!folder)
            return NULL;
        if (getcwd(folder, size))
            return folder;
        free(folder);
        if (errno != ERANGE)
            return NULL;
        size *= 2;
    }
}

/* Whether environ[index] names a variable an earlier entry already named:
 * Python's os.environ keeps the first of duplicates, as getenv does. */
static int named_before(size_t index, size_t name_length) {
    for (size_t j = 0; j < index; j++)
        if (strncmp(environ[j], environ[index], name_length) == 0 && environ[j][name_length] == '=')
            return 1;
    return 0;
}

/* The request, as cqb.jobs.client.forward builds it; 0 when it cannot be built. */
static int build_request(struct buffer *out, int argc, char **argv) {
    char number[32];
    append_text(out, "{\"argv\": [");
    for (int i = 1; i < argc; i++) {
        if (i > 1)
            append_text(out, ", ");
        append_json_string(out, argv[i], strlen(argv[i]));
    }
    char *folder = current_folder();
    if (!folder)
        return 0;
    append_text(out, "], \"cwd\": ");
    append_json_string(out, folder, strlen(folder));
    free(folder);
    append_text(out, ", \"env\": {");
    int first = 1;
    for (size_t i = 0; environ[i]; i++) {
        const char *equals = strchr(environ[i], '=');
        if (!equals || equals == environ[i]) /* no name: not a variable Python would see */
            continue;
        size_t name_length = (size_t)(equals - environ[i]);
        if (named_before(i, name_length))
            continue;
        if (!first)
            append_text(out, ", ");
        first = 0;
        append_json_string(out, environ[i], name_length);
        append_text(out, ": ");
        append_json_string(out, equals + 1, strlen(equals + 1));
    }
    mode_t mask = umask(077); /* reading the umask means setting it: set it straight back */
    umask(mask);
    snprintf(number, sizeof number, "}, \"umask\": %u}", (unsigned)mask);
    append_text(out, number);
    return !out->failed;
}

/* 1 and the run's exit status in *status when the server ran it; 0 when no
 * server took it, or its run died with the server. */
static int forward(const char *socket_path, int argc, char **argv, int *status) {
    struct sockaddr_un address;
    if (strlen(socket_path) >= sizeof address.sun_path)
        return 0;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    strcpy(address.sun_path, socket_path);
    int connection = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (connection < 0)
        return 0;
    int connected;
    do
        connected = connect(connection, (struct sockaddr *)&address, sizeof address);
    while (connected < 0 && errno == EINTR);
    struct buffer request = {0};
    if (connected < 0 || !build_request(&request, argc, argv)) {
        close(connection);
        free(request.data);
        return 0;
    }

    /* one message: the request with the job's stdout and stderr */
    int fds[2] = {1, 2};
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof fds)];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec part = {request.data, request.length};
    struct msghdr message = {0};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof control.space;
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(header), fds, sizeof fds);
    ssize_t sent;
    do /* a server gone meanwhile: EPIPE, not a SIGPIPE that kills the job (Python ignores SIGPIPE) */
        sent = sendmsg(connection, &message, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    free(request.data);
    if (sent < 0) { /* e.g. EMSGSIZE: the Python client also runs the job itself, quietly */
        close(connection);
        return 0;
    }

    char reply[REPLY_LIMIT + 1];
    ssize_t received;
    do
        received = recv(connection, reply, REPLY_LIMIT, 0);
    while (received < 0 && errno == EINTR);
    size_t refused_length = strlen(REFUSED);
    if (received >= (ssize_t)refused_length && memcmp(reply, REFUSED, refused_length) == 0) {
        close(connection);
        reply[received] = '\0';
        fprintf(stderr, "cqb: the run server did not take this run (%s); running in this process\n",
                reply + refused_length);
        return 0;
    }
    if (received != (ssize_t)strlen(STARTED) || memcmp(reply, STARTED, strlen(STARTED)) != 0) {
        close(connection);
        fputs("cqb: the run server went away; running in this process\n", stderr);
        return 0;
    }
    unsigned char status_bytes[4];
    do
        received = recv(connection, status_bytes, sizeof status_bytes, 0);
    while (received < 0 && errno == EINTR);
    int error = errno;
    if (received == (ssize_t)sizeof status_bytes) {
        ssize_t ended; /* "ended", or the close of a worker killed since: the log is complete */
        do
            ended = recv(connection, reply, REPLY_LIMIT, 0);
        while (ended < 0 && errno == EINTR);
    }
    close(connection);
    if (received == 0 || (received < 0 && error == ECONNRESET)) { /* cqb.jobs.client.RUN_DIED */
        fputs("cqb: the run server went away during the run, and the run died with it; "
              "running the job again in this process\n", stderr);
        unsetenv(STALE_SWEPT_VARIABLE);
        return 0;
    }
    if (received != (ssize_t)sizeof status_bytes) {
        fputs("cqb: the run server went away during the run; this job fails, to be rerun\n", stderr);
        *status = LOST_AFTER_START;
        return 1;
    }
    /* signed, as cqb.jobs.client.EXIT_STATUS ("!i") reads it */
    *status = (int)(((unsigned)status_bytes[0] << 24) | ((unsigned)status_bytes[1] << 16) |
                    ((unsigned)status_bytes[2] << 8) | status_bytes[3]);
    return 1;
}

static int run_in_own_process(char **argv) {
    const char *fallback = getenv(RUN_FALLBACK_VARIABLE);
    if (!fallback || !*fallback)
        fallback = "cqb";
    unsetenv(RUN_SERVER_VARIABLE); /* the Python command then runs the job itself */
    argv[0] = (char *)fallback;
    execvp(fallback, argv);
    fprintf(stderr, "cqb: cannot run %s (the fallback of the run client): %s\n", fallback, strerror(errno));
    return 127;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--source-hash") == 0) {
        puts(CLIENT_SOURCE_HASH);
        return 0;
    }
    const char *socket_path = getenv(RUN_SERVER_VARIABLE);
    /* only `run` goes to the server, as in cqb.cli.main */
    if (socket_path && *socket_path && argc > 1 && strcmp(argv[1], "run") == 0) {
        int status = 0;
        if (forward(socket_path, argc, argv, &status))
            return status & 0xff; /* what exit() keeps of it, as for the Python client */
    }
    return run_in_own_process(argv);
}
