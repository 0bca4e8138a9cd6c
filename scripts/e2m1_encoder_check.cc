// Dev check (issue 14, the fused quantize): the branch-free e2m1 encoder of kernels/mx_quantize.cuh
// (to_e2m1: rint(2a) below 1 as the low bits of a + 2^22) against the form it replaced (rint(2a) by a
// float-to-int conversion), on the host, over all 2^32 float bit patterns. Both are written here in
// plain C++ with the same operations (the device's __fadd_rn and __float2int_rn round to nearest even as
// the host's default mode does).
//   g++ -O2 -o /tmp/e2m1 scripts/e2m1_encoder_check.cc && /tmp/e2m1      (~20 s; prints the mismatches)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

static uint32_t bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

static uint32_t with_conversion(float v) {  // the encoder before 2026-11-25
  if (v != v) return 0x8u;
  const float a = std::fmin(std::fabs(v), 6.0f);
  const uint32_t b = bits(a);
  const uint32_t code = a < 1.0f ? static_cast<uint32_t>(static_cast<int>(std::rint(2.0f * a)))
                                 : ((b + 0x1fffffu + ((b >> 22) & 1u)) >> 22) - 252u;
  return code | ((bits(v) >> 28) & 0x8u);
}

static uint32_t branch_free(float v) {  // to_e2m1 now
  const float a = std::fmin(std::fabs(v), 6.0f);
  const uint32_t b = bits(a);
  volatile float magic = 4194304.0f;  // 2^22: an add at run time, rounded to nearest even
  const uint32_t lo = bits(a + magic) - 0x4a800000u;
  const uint32_t hi = ((b + 0x1fffffu + ((b >> 22) & 1u)) >> 22) - 252u;
  const uint32_t code = (a < 1.0f ? lo : hi) | ((bits(v) >> 28) & 0x8u);
  return v != v ? 0x8u : code;
}

int main() {
  uint64_t bad = 0;
  for (uint64_t i = 0; i <= 0xffffffffull; ++i) {
    const float v = from_bits(static_cast<uint32_t>(i));
    if (with_conversion(v) != branch_free(v) && bad++ < 8)
      std::printf("0x%08x: %u vs %u\n", static_cast<uint32_t>(i), with_conversion(v), branch_free(v));
  }
  std::printf("%llu mismatches over 2^32 floats\n", static_cast<unsigned long long>(bad));
  return bad != 0;
}
