/* The race session 34 found (bench/results/explore-2026-11-26-h200x2-s34.txt): a fresh
 * staging segment, mapped once by its sender and once by a receiver, written once
 * through the sender's mapping (its first touch of those pages) while the receiver pins
 * its own mapping. Shared by ocl-wrap-writeback.c and cuda-register-race.c (link with
 * -pthread). */
#ifndef MPIACC_DIAG_FIRST_WRITE_RACE_H
#define MPIACC_DIAG_FIRST_WRITE_RACE_H
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock_us.h"

/* A memfd of `bytes` whose pages exist (posix_fallocate, as the staging pools make
 * theirs) but were never touched; exits on failure. */
static int fresh_memfd(size_t bytes, const char *name) {
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0 || posix_fallocate(fd, 0, (off_t)bytes) != 0) {
        perror("memfd");
        exit(1);
    }
    return fd;
}

static void *map_shared(int fd, size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return p;
}

/* One fresh segment, mapped twice. */
typedef struct {
    uint64_t *sender;
    char *receiver;
    size_t bytes;
} RaceSegment;

static RaceSegment race_segment(size_t bytes) {
    int fd = fresh_memfd(bytes, "first-write-race");
    RaceSegment s = {map_shared(fd, bytes), map_shared(fd, bytes), bytes};
    close(fd);
    return s;
}

static void race_segment_free(RaceSegment *s) {
    munmap(s->sender, s->bytes);
    munmap(s->receiver, s->bytes);
}

/* What the writer puts in word `i` in trial `trial`. */
static uint64_t race_word(int trial, size_t i) { return 0xC0FFEE0000000000ull ^ (uint64_t)trial << 32 ^ i; }

/* Writes every word of the sender's mapping once, trial * 37 % 1000 us after race_go. */
typedef struct {
    RaceSegment *segment;
    int trial;
    atomic_int go;
    pthread_t thread;
} RaceWriter;

static void *race_write_once(void *arg) {
    RaceWriter *w = arg;
    while (!atomic_load(&w->go)) {
    }
    const double until = now_us() + (double)(w->trial * 37 % 1000);
    while (now_us() < until) {
    }
    for (size_t i = 0; i < w->segment->bytes / 8; i++) w->segment->sender[i] = race_word(w->trial, i);
    return NULL;
}

static void race_writer_start(RaceWriter *w, RaceSegment *segment, int trial) {
    w->segment = segment;
    w->trial = trial;
    atomic_init(&w->go, 0);
    pthread_create(&w->thread, NULL, race_write_once, w);
}

static void race_go(RaceWriter *w) { atomic_store(&w->go, 1); }

/* A trial's fresh segment, its writer started and let go: the caller pins now. */
static void race_begin(RaceSegment *segment, RaceWriter *w, size_t bytes, int trial) {
    *segment = race_segment(bytes);
    race_writer_start(w, segment, trial);
    race_go(w);
}

/* Joins the writer; the words that no longer read as it wrote them (*first: the first). */
static size_t race_writer_join(RaceWriter *w, size_t *first) {
    pthread_join(w->thread, NULL);
    size_t lost = 0;
    for (size_t i = 0; i < w->segment->bytes / 8; i++)
        if (w->segment->sender[i] != race_word(w->trial, i) && lost++ == 0) *first = i;
    return lost;
}

#endif
