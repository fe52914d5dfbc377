// One request at a time over a Unix socket, timed at the client: the floor of a read's round trip,
// without folio-bench's buffering. Prints p10, p50, p90 and the mean in µs.
//
//     cc -O2 -o pingpong bench/pingpong.c
//     taskset -c 0 ./pingpong FOLIO_SOCKET '{"op":"list","view":"byRank","offset":50000,"limit":20}' 5000
//     taskset -c 0 ./pingpong REDIS_SOCKET $'*2|\n$5|\nZCARD|\n$5|\nranks|' 5000 redis
//
// foliod's answers end at a newline. For Redis, `|` in the command stands for `\r` (the newlines are
// the shell's: `$'...'`, not `'...'`, which would send a backslash and an n), and every
// answer must be as long as the first (the same command each time: a fixed-size reply), which is
// read whole after a pause the first time.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int compare(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: pingpong SOCKET REQUEST COUNT [redis]\n");
        return 64;
    }
    int redis = argc > 4, n = atoi(argv[3]);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
    if (n < 1 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        perror("connect");
        return 1;
    }
    char request[4096];
    snprintf(request, sizeof request, "%s\n", argv[2]);
    if (redis)
        for (char *p = request; *p; p++)
            if (*p == '|') *p = '\r';
    size_t length = strlen(request), expected = 0;
    static char buffer[1 << 20];
    long long *times = malloc(sizeof(long long) * n);
    for (int i = 0; i < n; i++) {
        long long start = now();
        if (write(fd, request, length) != (ssize_t)length) {
            perror("write");
            return 1;
        }
        size_t got = 0;
        for (;;) {
            ssize_t count = read(fd, buffer + got, sizeof buffer - got);
            if (count <= 0) {
                perror("read");
                return 1;
            }
            got += count;
            if (!redis && buffer[got - 1] == '\n') break;
            if (redis && expected && got >= expected) break;
            if (redis && !expected) {
                usleep(2000);
                while ((count = recv(fd, buffer + got, sizeof buffer - got, MSG_DONTWAIT)) > 0) got += count;
                expected = got;
                break;
            }
        }
        times[i] = now() - start;
        if (i == 0 && !redis && strncmp(buffer, "{\"ok\":true", 10) != 0) {
            fprintf(stderr, "pingpong: %.*s\n", (int)(got < 300 ? got : 300), buffer);
            return 1;
        }
    }
    qsort(times, n, sizeof *times, compare);
    long long sum = 0;
    for (int i = 0; i < n; i++) sum += times[i];
    printf("p50 %.2f us  p10 %.2f  p90 %.2f  mean %.2f\n", times[n / 2] / 1e3, times[n / 10] / 1e3, times[n * 9 / 10] / 1e3, sum / (double)n / 1e3);
    return 0;
}
