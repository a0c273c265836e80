// Linux's epoll and eventfd for the stream connections' loops; only the
// Streams target imports this module.
#pragma once
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

// `struct epoll_event` is packed on x86_64, a layout Swift cannot import:
// these take and give its two fields apart.
static inline int cevent_poll_control(int poller, int operation, int descriptor, uint32_t events, uint64_t data) {
    struct epoll_event event;
    event.events = events;
    event.data.u64 = data;
    return epoll_ctl(poller, operation, descriptor, &event);
}

enum { cevent_poll_batch = 256 };

// Waits for at most `cevent_poll_batch` events; each one's data and
// events land at the same index of `data` and `events`.
static inline int cevent_poll_wait(int poller, uint64_t *data, uint32_t *events, int timeout) {
    struct epoll_event ready[cevent_poll_batch];
    int count = epoll_wait(poller, ready, cevent_poll_batch, timeout);
    for (int index = 0; index < count; index++) {
        data[index] = ready[index].data.u64;
        events[index] = ready[index].events;
    }
    return count;
}
