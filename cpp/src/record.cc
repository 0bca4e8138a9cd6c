// jax_tmem: XLA FFI's record stage for the CUDA handlers (see jax_tmem/record.h). The record handler of a
// custom call finds the record extension in the call frame, makes a Sink current on this thread and runs the
// call's own execute handler (a copy of the call frame with the execute stage): its launches go to the sink,
// which creates them as kernel nodes (first recording, each depending on the one before) or updates them in
// the same order (later recordings: new buffer addresses, new tensor maps). Where a kernel's image is not
// found, nothing has been recorded yet, so the call asks XLA to trace it as before (request_stream_capture),
// and JAX_TMEM_LOG-style visibility comes from the counters (record_stats()).
#include "jax_tmem/record.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "jax_tmem/kernel_images.h"
#include "jax_tmem/record_stage.h"

#if JAX_TMEM_HAS_FFI_RECORD
#include "xla/ffi/api/record_c_api.h"
#endif

namespace jax_tmem::record {

#if JAX_TMEM_HAS_FFI_RECORD
namespace {

std::atomic<long long> g_created{0}, g_updated{0}, g_captured{0}, g_failed{0};
std::atomic<long long> g_update_ns{0}, g_update_xla_ns{0};
long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
std::mutex g_reason_mu;
std::string g_last_reason;  // the last reason a call was traced instead of recorded

struct Image {
  std::string name;
  const images::Cubin* cubin = nullptr;
  std::string why;
};

// The kernel's image for the device of compute capability `cc`, looked up once per (function, cc).
const Image& image_of(const void* func, int cc) {
  static std::mutex mu;
  static std::unordered_map<const void*, std::unordered_map<int, Image>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = cache[func].try_emplace(cc);
  Image& im = it->second;
  if (fresh) {
    const char* name = nullptr;
    const cudaError_t e = cudaFuncGetName(&name, func);
    if (e != cudaSuccess || name == nullptr) {
      im.why = std::string("cudaFuncGetName: ") + cudaGetErrorString(e);
    } else {
      im.name = name;
      im.cubin = images::find(name, cc, &im.why);
    }
  }
  return im;
}

}  // namespace

class Sink {
 public:
  Sink(const XLA_FFI_RecordFrame* frame, int cc) : frame_(frame), cc_(cc) {}

  cudaError_t launch(const void* func, const cudaLaunchConfig_t& cfg, void* const* args, const size_t* sizes, int n) {
    if (!error_.empty() || capture_) return cudaErrorNotSupported;
    const bool create = frame_->action == XLA_FFI_RecordAction_Create;
    std::vector<XLA_FFI_KernelArg> raw(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      raw[i] = XLA_FFI_KernelArg{args[i], static_cast<int64_t>(sizes[i]), XLA_FFI_KernelArgType_HostValue};
    const XLA_FFI_KernelArgs kargs{raw.data(), n};
    if (!create) {  // the same launches as when created, in the same order: new arguments only
      if (next_ >= *frame_->num_commands) return fail("an update recorded more launches than were created");
      const long long t0 = now_ns();
      const cudaError_t e = check(frame_->api->update_launch(frame_->record_ctx, frame_->commands[next_++], &kargs));
      g_update_xla_ns += now_ns() - t0;
      return e;
    }
    const Image& im = image_of(func, cc_);
    if (im.cubin == nullptr) {
      if (*frame_->num_commands == 0) {  // nothing recorded yet: this call is traced instead
        capture_ = true;
        std::lock_guard<std::mutex> lock(g_reason_mu);
        g_last_reason = im.name.empty() ? im.why : im.name + ": " + im.why;
        return cudaErrorNotSupported;
      }
      return fail("no image for " + im.name + ": " + im.why);
    }
    XLA_FFI_LaunchDims dims{};
    dims.grid = {static_cast<int32_t>(cfg.gridDim.x), static_cast<int32_t>(cfg.gridDim.y),
                 static_cast<int32_t>(cfg.gridDim.z)};
    dims.block = {static_cast<int32_t>(cfg.blockDim.x), static_cast<int32_t>(cfg.blockDim.y),
                  static_cast<int32_t>(cfg.blockDim.z)};
    int32_t pdl = 0;
    for (unsigned i = 0; i < cfg.numAttrs; ++i) {
      const cudaLaunchAttribute& a = cfg.attrs[i];
      if (a.id == cudaLaunchAttributeClusterDimension)
        dims.cluster = {static_cast<int32_t>(a.val.clusterDim.x), static_cast<int32_t>(a.val.clusterDim.y),
                        static_cast<int32_t>(a.val.clusterDim.z)};
      else if (a.id == cudaLaunchAttributeProgrammaticStreamSerialization)
        pdl = a.val.programmaticStreamSerializationAllowed ? 1 : 0;
      else
        return fail("launch attribute " + std::to_string(static_cast<int>(a.id)) + " has no recorded form");
    }
    if (frame_->commands == nullptr || *frame_->num_commands >= frame_->max_commands)
      return fail("more launches than the record frame holds (" + std::to_string(frame_->max_commands) + ")");
    const XLA_FFI_Command* prev = *frame_->num_commands > 0 ? frame_->commands[*frame_->num_commands - 1] : nullptr;
    const XLA_FFI_Command* cmd = nullptr;
    cudaError_t e = check(frame_->api->create_launch(
        frame_->record_ctx, im.name.c_str(), im.cubin->data, static_cast<int64_t>(im.cubin->size),
        XLA_FFI_SourceFormat_CUBIN, dims, static_cast<uint32_t>(cfg.dynamicSmemBytes), pdl, &kargs,
        prev != nullptr ? &prev : nullptr, prev != nullptr ? 1u : 0u, &cmd));
    if (e != cudaSuccess) return e;
    frame_->commands[(*frame_->num_commands)++] = cmd;
    return cudaSuccess;
  }

  bool capture() const { return capture_; }
  const std::string& error() const { return error_; }
  int64_t updated() const { return next_; }

 private:
  cudaError_t fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return cudaErrorNotSupported;
  }
  cudaError_t check(XLA_FFI_Error* err) {
    if (err == nullptr) return cudaSuccess;
    xla_error_ = err;  // returned by the record handler as it is
    return fail("the record API refused the launch");
  }

 public:
  XLA_FFI_Error* xla_error_ = nullptr;

 private:
  const XLA_FFI_RecordFrame* frame_;
  int cc_;
  int64_t next_ = 0;
  bool capture_ = false;
  std::string error_;
};

namespace {
thread_local Sink* g_active = nullptr;

XLA_FFI_Error* make_error(const XLA_FFI_Api* api, const std::string& msg) {
  XLA_FFI_Error_Create_Args e{};
  e.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  e.message = msg.c_str();
  e.errc = XLA_FFI_Error_Code_INTERNAL;
  return api->XLA_FFI_Error_Create(&e);
}

void destroy(const XLA_FFI_Api* api, XLA_FFI_Error* err) {
  if (err == nullptr) return;
  XLA_FFI_Error_Destroy_Args d{};
  d.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
  d.error = err;
  api->XLA_FFI_Error_Destroy(&d);
}
}  // namespace

Sink* active() { return g_active; }

cudaError_t record_launch(Sink* sink, const void* func, const cudaLaunchConfig_t& cfg, void* const* args,
                          const size_t* sizes, int num_args) {
  return sink->launch(func, cfg, args, sizes, num_args);
}

XLA_FFI_Error* record_stage(XLA_FFI_CallFrame* cf, XLA_FFI_Handler* execute) {
  for (XLA_FFI_InternalExtension* e = cf->extension_start; e != nullptr; e = e->next)
    if (e->type == XLA_FFI_Extension_Metadata) return execute(cf);  // XLA asking for version and traits
  XLA_FFI_InvokeContext_FindExtension_Args fa{};
  fa.struct_size = XLA_FFI_InvokeContext_FindExtension_Args_STRUCT_SIZE;
  fa.ctx = cf->ctx;
  fa.extension_type = XLA_FFI_Extension_Record;
  if (XLA_FFI_Error* err = cf->api->XLA_FFI_InvokeContext_FindExtension(&fa)) return err;
  if (fa.extension == nullptr) return make_error(cf->api, "jax_tmem: no record extension in the record stage");
  const XLA_FFI_RecordFrame* frame = reinterpret_cast<const XLA_FFI_Record_Extension*>(fa.extension)->record_frame;
  int dev = -1, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return make_error(cf->api, "jax_tmem: the record stage cannot read the device's compute capability");
  Sink sink(frame, major * 10 + minor);
  const long long t0 = frame->action == XLA_FFI_RecordAction_Create ? 0 : now_ns();
  XLA_FFI_CallFrame as_execute = *cf;
  as_execute.stage = XLA_FFI_ExecutionStage_EXECUTE;
  g_active = &sink;
  XLA_FFI_Error* err = execute(&as_execute);
  g_active = nullptr;
  if (sink.capture()) {  // nothing recorded: XLA traces the execute handler for this call, as without a record stage
    destroy(cf->api, err);
    ++g_captured;
    return frame->api->request_stream_capture(frame->record_ctx);
  }
  if (sink.xla_error_ != nullptr) {
    destroy(cf->api, err);
    ++g_failed;
    return sink.xla_error_;
  }
  if (!sink.error().empty()) {
    destroy(cf->api, err);
    ++g_failed;
    return make_error(cf->api, "jax_tmem record stage: " + sink.error());
  }
  if (err != nullptr) return err;
  if (frame->action == XLA_FFI_RecordAction_Create) {
    ++g_created;
  } else {
    if (sink.updated() != *frame->num_commands) {
      ++g_failed;
      return make_error(cf->api, "jax_tmem record stage: an update recorded " + std::to_string(sink.updated()) +
                                     " launches, the call created " + std::to_string(*frame->num_commands));
    }
    ++g_updated;
    g_update_ns += now_ns() - t0;
  }
  return nullptr;
}

namespace {
std::vector<std::string> g_registered;  // under g_reason_mu
std::string g_register_error;
}  // namespace

XLA_FFI_Error* bootstrap(XLA_FFI_CallFrame* cf, const Target* targets, int num_targets) {
  for (XLA_FFI_InternalExtension* e = cf->extension_start; e != nullptr; e = e->next) {
    if (e->type != XLA_FFI_Extension_Metadata) continue;  // XLA asking for version and traits
    XLA_FFI_Metadata* md = reinterpret_cast<XLA_FFI_Metadata_Extension*>(e)->metadata;
    md->api_version.major_version = XLA_FFI_API_MAJOR;
    md->api_version.minor_version = XLA_FFI_API_MINOR;
    md->traits = 0;  // never traced into a command buffer: it must run once, on the host
    return nullptr;
  }
  static std::once_flag once;
  std::call_once(once, [&] {
    static const char kPlatform[] = "CUDA";
    for (int i = 0; i < num_targets; ++i) {
      XLA_FFI_Handler_Register_Args ra{};
      ra.struct_size = XLA_FFI_Handler_Register_Args_STRUCT_SIZE;
      ra.name = {targets[i].name, std::char_traits<char>::length(targets[i].name)};
      ra.platform = {kPlatform, sizeof(kPlatform) - 1};
      ra.bundle.execute = targets[i].execute;
      ra.bundle.record = targets[i].record;
      ra.traits = XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE;
      XLA_FFI_Error* err = cf->api->XLA_FFI_Handler_Register(&ra);
      std::lock_guard<std::mutex> lock(g_reason_mu);
      if (err == nullptr) {
        g_registered.emplace_back(targets[i].name);
        continue;
      }
      XLA_FFI_Error_GetDetails_Args ga{};
      ga.struct_size = XLA_FFI_Error_GetDetails_Args_STRUCT_SIZE;
      ga.error = err;
      cf->api->XLA_FFI_Error_GetDetails(&ga);
      g_register_error = std::string(targets[i].name) + ": " + (ga.message != nullptr ? ga.message : "(no message)");
      destroy(cf->api, err);
    }
  });
  return nullptr;
}

Stats stats() {
  std::lock_guard<std::mutex> lock(g_reason_mu);
  return Stats{true,          g_created.load(), g_updated.load(), g_captured.load(), g_failed.load(),
               g_last_reason, g_registered,     g_register_error, g_update_ns.load(), g_update_xla_ns.load()};
}

#else  // jaxlib's FFI headers have no record stage (before 0.11.2): every launch is executed

class Sink {};
Sink* active() { return nullptr; }
cudaError_t record_launch(Sink*, const void*, const cudaLaunchConfig_t&, void* const*, const size_t*, int) {
  return cudaErrorNotSupported;
}
Stats stats() { return Stats{false, 0, 0, 0, 0, "built against FFI headers without the record stage", {}, "", 0, 0}; }

#endif

}  // namespace jax_tmem::record
