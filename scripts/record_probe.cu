// Probe of XLA FFI's record stage (jaxlib >= 0.11.2: xla/ffi/api/record_c_api.h): one small kernel behind a
// custom call whose "record" handler creates / updates its launch as a kernel node of XLA's command buffer
// (no stream capture, no child graph), optionally with a programmatic (PDL) edge. Built and driven by
// scripts/record_probe.py on a GPU machine; not part of the package.
//
// The kernel: y = a * x + b after `spin` clock cycles of independent work (the "prologue" that a PDL edge
// lets overlap the previous kernel's tail).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <vector>

extern "C" __global__ void probe_axpb(const float* __restrict__ x, float* __restrict__ y, float a, float b,
                                      int n, long long spin) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const long long t0 = clock64();
  while (clock64() - t0 < spin) {
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");  // a no-op unless launched with a programmatic edge
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}

#ifndef PROBE_KERNEL_ONLY
#include "xla/ffi/api/c_api.h"
#include "xla/ffi/api/record_c_api.h"

namespace {

constexpr float kA = 1.0f, kB = 1.0f;
constexpr int kBlock = 256;
std::vector<char> g_cubin;
int g_use_pdl = 0, g_capture = 0;
long long g_spin = 0;
std::atomic<long long> g_exec{0}, g_create{0}, g_update{0}, g_capture_req{0};

XLA_FFI_Error* error(const XLA_FFI_Api* api, const char* msg) {
  XLA_FFI_Error_Create_Args e{};
  e.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  e.message = msg;
  e.errc = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  return api->XLA_FFI_Error_Create(&e);
}

// XLA asks each handler for its API version and traits by a call frame carrying a metadata extension.
bool answer_metadata(XLA_FFI_CallFrame* cf) {
  for (XLA_FFI_InternalExtension* e = cf->extension_start; e != nullptr; e = e->next) {
    if (e->type != XLA_FFI_Extension_Metadata) continue;
    XLA_FFI_Metadata* md = reinterpret_cast<XLA_FFI_Metadata_Extension*>(e)->metadata;
    md->api_version.major_version = XLA_FFI_API_MAJOR;
    md->api_version.minor_version = XLA_FFI_API_MINOR;
    md->traits = XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE;
    return true;
  }
  return false;
}

// The one f32 argument and the one f32 result, or an error naming what is wrong.
XLA_FFI_Error* operands(XLA_FFI_CallFrame* cf, const float** x, float** y, int* n) {
  if (cf->args.size != 1 || cf->rets.size != 1 || cf->args.types[0] != XLA_FFI_ArgType_BUFFER ||
      cf->rets.types[0] != XLA_FFI_RetType_BUFFER)
    return error(cf->api, "record_probe: expects one buffer argument and one buffer result");
  auto* xb = static_cast<XLA_FFI_Buffer*>(cf->args.args[0]);
  auto* yb = static_cast<XLA_FFI_Buffer*>(cf->rets.rets[0]);
  if (xb->dtype != XLA_FFI_DataType_F32 || yb->dtype != XLA_FFI_DataType_F32)
    return error(cf->api, "record_probe: float32 only");
  int64_t elems = 1;
  for (int64_t d = 0; d < xb->rank; ++d) elems *= xb->dims[d];
  *x = static_cast<const float*>(xb->data);
  *y = static_cast<float*>(yb->data);
  *n = static_cast<int>(elems);
  return nullptr;
}

}  // namespace

extern "C" {

void probe_set(int use_pdl, long long spin, int capture, const void* cubin, size_t size) {
  g_use_pdl = use_pdl;
  g_spin = spin;
  g_capture = capture;
  g_cubin.assign(static_cast<const char*>(cubin), static_cast<const char*>(cubin) + size);
}

void probe_counts(long long* out) {
  out[0] = g_exec.load();
  out[1] = g_create.load();
  out[2] = g_update.load();
  out[3] = g_capture_req.load();
}

XLA_FFI_Error* probe_execute(XLA_FFI_CallFrame* cf) {
  if (answer_metadata(cf)) return nullptr;
  const float* x;
  float* y;
  int n;
  if (XLA_FFI_Error* e = operands(cf, &x, &y, &n)) return e;
  XLA_FFI_Stream_Get_Args sa{};
  sa.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
  sa.ctx = cf->ctx;
  if (XLA_FFI_Error* e = cf->api->XLA_FFI_Stream_Get(&sa)) return e;
  ++g_exec;
  probe_axpb<<<(n + kBlock - 1) / kBlock, kBlock, 0, static_cast<cudaStream_t>(sa.stream)>>>(x, y, kA, kB, n,
                                                                                             g_spin);
  return cudaGetLastError() == cudaSuccess ? nullptr : error(cf->api, "record_probe: launch failed");
}

XLA_FFI_Error* probe_record(XLA_FFI_CallFrame* cf) {
  if (answer_metadata(cf)) return nullptr;
  XLA_FFI_InvokeContext_FindExtension_Args fa{};
  fa.struct_size = XLA_FFI_InvokeContext_FindExtension_Args_STRUCT_SIZE;
  fa.ctx = cf->ctx;
  fa.extension_type = XLA_FFI_Extension_Record;
  if (XLA_FFI_Error* e = cf->api->XLA_FFI_InvokeContext_FindExtension(&fa)) return e;
  if (fa.extension == nullptr) return error(cf->api, "record_probe: no record extension in the call frame");
  XLA_FFI_RecordFrame* fr = reinterpret_cast<const XLA_FFI_Record_Extension*>(fa.extension)->record_frame;
  if (g_capture) {  // the baseline: let XLA trace the execute handler as before
    ++g_capture_req;
    return fr->api->request_stream_capture(fr->record_ctx);
  }
  const float* x;
  float* y;
  int n;
  if (XLA_FFI_Error* e = operands(cf, &x, &y, &n)) return e;
  float a = kA, b = kB;
  long long spin = g_spin;
  XLA_FFI_KernelArg raw[6] = {
      {x, 0, XLA_FFI_KernelArgType_DevicePtr},         {y, 0, XLA_FFI_KernelArgType_DevicePtr},
      {&a, sizeof(a), XLA_FFI_KernelArgType_HostValue}, {&b, sizeof(b), XLA_FFI_KernelArgType_HostValue},
      {&n, sizeof(n), XLA_FFI_KernelArgType_HostValue}, {&spin, sizeof(spin), XLA_FFI_KernelArgType_HostValue}};
  XLA_FFI_KernelArgs args{raw, 6};
  if (fr->action == XLA_FFI_RecordAction_Create) {
    if (g_cubin.empty()) return error(cf->api, "record_probe: no cubin (call probe_set first)");
    XLA_FFI_LaunchDims dims{{(n + kBlock - 1) / kBlock, 1, 1}, {kBlock, 1, 1}, {0, 0, 0}};
    const XLA_FFI_Command* cmd = nullptr;
    if (XLA_FFI_Error* e = fr->api->create_launch(fr->record_ctx, "probe_axpb", g_cubin.data(),
                                                  static_cast<int64_t>(g_cubin.size()), XLA_FFI_SourceFormat_CUBIN,
                                                  dims, 0, g_use_pdl, &args, nullptr, 0, &cmd))
      return e;
    if (fr->commands == nullptr || *fr->num_commands >= fr->max_commands)
      return error(cf->api, "record_probe: no room for the command in the record frame");
    fr->commands[(*fr->num_commands)++] = cmd;
    ++g_create;
    return nullptr;
  }
  if (fr->commands == nullptr || *fr->num_commands != 1)
    return error(cf->api, "record_probe: update without the one command created before");
  ++g_update;
  return fr->api->update_launch(fr->record_ctx, fr->commands[0], &args);
}

// The record stage without JAX's registration (which passes execute-stage handlers only: 2026-11-27 10:07):
// XLA hands every handler its own XLA_FFI_Api, whose XLA_FFI_Handler_Register takes a whole bundle, record
// included, into the registry XLA's compiler looks custom-call targets up in. This handler, registered through
// JAX for execute only, registers probe_execute + probe_record under `jax_tmem_record_probe_direct` the first
// time it runs (so a program using that target must be compiled after one call of this one), then behaves as
// probe_execute.
XLA_FFI_Error* probe_bootstrap(XLA_FFI_CallFrame* cf) {
  if (answer_metadata(cf)) return nullptr;
  static std::atomic<int> registered{0};
  if (registered.exchange(1) == 0) {
    static const char kName[] = "jax_tmem_record_probe_direct";
    static const char kPlatform[] = "CUDA";
    XLA_FFI_Handler_Register_Args ra{};
    ra.struct_size = XLA_FFI_Handler_Register_Args_STRUCT_SIZE;
    ra.name = {kName, sizeof(kName) - 1};
    ra.platform = {kPlatform, sizeof(kPlatform) - 1};
    ra.bundle.execute = probe_execute;
    ra.bundle.record = probe_record;
    ra.traits = XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE;
    if (XLA_FFI_Error* e = cf->api->XLA_FFI_Handler_Register(&ra)) return e;
  }
  return probe_execute(cf);
}

}  // extern "C"
#endif  // PROBE_KERNEL_ONLY
