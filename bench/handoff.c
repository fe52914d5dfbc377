// What the three hand-overs of a durable write cost on this machine, without any work between
// them: a thread in epoll_wait (foliod's event loop) passes a token to a thread waiting on a
// condition variable (the writer), which passes it to another (the journal's thread), which
// passes it back through an eventfd, as Writer.deliver posts to a loop. One round trip is what a
// one-client write waits on top of its own work and its sync; Redis answers from the thread
// that read the request. Each hop also runs alone (one thread waking the next and back), to show
// what one wake-up costs.
//
//     cc -O2 -o handoff bench/handoff.c -lpthread && ./handoff [ROUNDS]     (make bench-handoff)
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct box {
    pthread_mutex_t mutex;
    pthread_cond_t condition;
    int full;
};

static struct box writer_box = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
static struct box journal_box = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
static int loop_event;
static int stages = 2;  // threads after the loop: 2 (writer, journal) or 1 (writer answers)

static uint64_t now_ns(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (uint64_t)time.tv_sec * 1000000000u + (uint64_t)time.tv_nsec;
}

static void put(struct box *box) {
    pthread_mutex_lock(&box->mutex);
    box->full = 1;
    pthread_cond_signal(&box->condition);
    pthread_mutex_unlock(&box->mutex);
}

static void take(struct box *box) {
    pthread_mutex_lock(&box->mutex);
    while (!box->full) pthread_cond_wait(&box->condition, &box->mutex);
    box->full = 0;
    pthread_mutex_unlock(&box->mutex);
}

static void answer(void) {
    uint64_t one = 1;
    if (write(loop_event, &one, sizeof(one)) != sizeof(one)) abort();
}

static void *writer(void *unused) {
    (void)unused;
    for (;;) {
        take(&writer_box);
        if (stages == 2) put(&journal_box);
        else answer();
    }
    return NULL;
}

static void *journal(void *unused) {
    (void)unused;
    for (;;) {
        take(&journal_box);
        answer();
    }
    return NULL;
}

static int compare(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

// Round trips from the loop, through `stages` threads and back; prints p50, p90, p99 in µs.
static void measure(const char *label, int epoll, int rounds) {
    uint64_t *times = malloc(sizeof(uint64_t) * (size_t)rounds);
    for (int round = -rounds / 10; round < rounds; round++) {
        uint64_t start = now_ns();
        put(&writer_box);
        struct epoll_event event;
        while (epoll_wait(epoll, &event, 1, -1) != 1) {}
        uint64_t count;
        if (read(loop_event, &count, sizeof(count)) != sizeof(count)) abort();
        if (round >= 0) times[round] = now_ns() - start;
        // As a client would: the next request comes some time after the answer.
        usleep(200);
    }
    qsort(times, (size_t)rounds, sizeof(uint64_t), compare);
    printf("%-44s p50 %6.1f µs   p90 %6.1f µs   p99 %6.1f µs\n", label, times[rounds / 2] / 1000.0,
           times[rounds * 9 / 10] / 1000.0, times[rounds * 99 / 100] / 1000.0);
    free(times);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5000;
    loop_event = eventfd(0, EFD_NONBLOCK);
    int epoll = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = loop_event};
    epoll_ctl(epoll, EPOLL_CTL_ADD, loop_event, &event);
    pthread_t threads[2];
    pthread_create(&threads[0], NULL, writer, NULL);
    pthread_create(&threads[1], NULL, journal, NULL);
    stages = 2;
    measure("loop -> writer -> journal -> loop (3 hops)", epoll, rounds);
    stages = 1;
    measure("loop -> writer -> loop (2 hops)", epoll, rounds);
    return 0;
}
