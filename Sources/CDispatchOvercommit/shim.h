// libdispatch's overcommitting global queue, where the session runs the
// user's code (ContextQueues.swift says why). Swift's Dispatch module has
// no way to ask for it: these are libdispatch's own C functions, declared
// under names of ours so that they do not clash with that module's.
#pragma once
#include <stdint.h>

typedef struct urlloading_dispatch_queue_s *urlloading_dispatch_queue_t;
typedef void (*urlloading_dispatch_function_t)(void *_Nullable);

urlloading_dispatch_queue_t _Nullable urlloading_dispatch_get_global_queue(intptr_t identifier, uintptr_t flags)
    __asm__("dispatch_get_global_queue");
void urlloading_dispatch_async_f(
    urlloading_dispatch_queue_t _Nonnull queue, void *_Nullable context, urlloading_dispatch_function_t _Nonnull work)
    __asm__("dispatch_async_f");

// DISPATCH_QUEUE_OVERCOMMIT of libdispatch (the one flag its
// dispatch_get_global_queue takes); DISPATCH_QUEUE_PRIORITY_DEFAULT.
enum { urlloading_dispatch_overcommit = 0x2, urlloading_dispatch_priority_default = 0 };
