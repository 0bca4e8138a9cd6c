// jax_tmem: the record-stage handlers of the CUDA custom calls (record.cc; see jax_tmem/record.h).
#pragma once

#include <string>
#include <vector>

#include "xla/ffi/api/c_api.h"

#if defined(__has_include)
#if __has_include("xla/ffi/api/record_c_api.h")
#define JAX_TMEM_HAS_FFI_RECORD 1
#endif
#endif
#ifndef JAX_TMEM_HAS_FFI_RECORD
#define JAX_TMEM_HAS_FFI_RECORD 0
#endif

namespace jax_tmem::record {

// What the record stage did in this process (the report and tests read it).
struct Stats {
  bool available;           // built against FFI headers with the record stage
  long long created;        // calls recorded as kernel nodes (first recording of a command buffer)
  long long updated;        // calls whose kernel nodes were updated with new arguments
  long long captured;       // calls handed back to stream capture (no kernel image), see last_reason
  long long failed;         // calls that returned an error from the record stage
  std::string last_reason;  // why the last captured call was not recorded
  std::vector<std::string> registered;  // targets whose bundle (execute + record) bootstrap() gave XLA
  std::string register_error;           // why bootstrap() could not, if it could not
  // Host time of the updates (nanoseconds, summed over calls): the whole record handler, and the part spent in
  // XLA's update_launch (the rest is ours: attributes, plan, tensor maps).
  long long update_ns;
  long long update_xla_ns;
};
Stats stats();

#if JAX_TMEM_HAS_FFI_RECORD
// Runs `execute` (the call's execute handler) with its launches recorded into the frame of the call's record
// extension; see record.cc.
XLA_FFI_Error* record_stage(XLA_FFI_CallFrame* call_frame, XLA_FFI_Handler* execute);

// The record handler of the custom call whose execute handler is `Execute`.
template <XLA_FFI_Handler* Execute>
XLA_FFI_Error* record_handler(XLA_FFI_CallFrame* call_frame) {
  return record_stage(call_frame, Execute);
}

// A custom call's handler bundle for XLA: its execute handler and its record handler.
struct Target {
  const char* name;
  XLA_FFI_Handler* execute;
  XLA_FFI_Handler* record;
};

// The execute handler of a one-off bootstrap call. JAX registers FFI targets with execute-stage handlers only
// (jaxlib 0.11.2: a "record" key is dropped, docs/PERF.md 2026-11-27 10:06), but XLA hands every handler its
// own XLA_FFI_Api, whose XLA_FFI_Handler_Register takes a whole bundle into the registry XLA's compiler reads.
// The first call registers each target's bundle there (programs compiled afterwards get the record stage);
// later calls do nothing. It writes no output.
XLA_FFI_Error* bootstrap(XLA_FFI_CallFrame* call_frame, const Target* targets, int num_targets);
#endif

}  // namespace jax_tmem::record
