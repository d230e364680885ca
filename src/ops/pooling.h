// Pooling: reuse what each request would otherwise allocate.
//
// The pools and arenas live where they are used (src/http/memory.h: the
// per-connection arena and handler slots; src/http/codec.h and message.cc:
// the parse buffers and the spare response body). Each is
// bounded, and past its bound falls back to plain allocation (still
// correct, just not free), so memory stays bounded whatever the load. The
// switch below exists to measure the difference (bench/request_bench,
// docs/benchmarks.md): HOTROW_POOLING=off at start-up disables them -- the
// arena, the handler slots and the body reuse -- and makes each request
// allocate as it would without them. It does not switch off InlineFunction,
// the connection's watchdog timer or the writer's ring: those are simply
// how the code is written now.
#pragma once

namespace hotrow::pooling {

// False when HOTROW_POOLING=off (read once).
bool Enabled();

}  // namespace hotrow::pooling
