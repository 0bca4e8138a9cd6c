// Dev check (issue 14, the fused quantize): the branch-free e2m1 encoder of kernels/mx_quantize.cuh
// (to_e2m1: rint(2a) below 1 as the low bits of a + 2^22) against the form it replaced (rint(2a) by a
// float-to-int conversion), on the host, over all 2^32 float bit patterns. Both are written here in
// plain C++ with the same operations (the device's __fadd_rn and __float2int_rn round to nearest even as
// the host's default mode does). Also to_e2m1_scaled16 (MXFP4 of 16-bit x: y = x * 2^k) against to_e2m1
// for every finite bf16 / f16 x times every power of two.
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

static uint32_t scaled16(float y) {  // to_e2m1_scaled16: y = x * 2^k for a 16-bit x
  volatile float tiny = 0x1p-126f;  // a multiply at run time (subnormal results kept: no flush to zero)
  const uint32_t b = bits(std::fmin(std::fabs(y), 6.0f) * tiny);
  return ((b + 0x1fffffu + ((b >> 22) & 1u)) >> 22) | ((bits(y) >> 28) & 0x8u);
}

static float bf16_value(uint32_t h) { return from_bits(h << 16); }
static float f16_value(uint32_t h) {  // IEEE binary16 to float, exactly
  const uint32_t s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float v = e == 0 ? std::ldexp(static_cast<float>(m), -24)
          : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(static_cast<float>(m | 0x400), static_cast<int>(e) - 25);
  return s ? -v : v;
}

int main() {
  // to_e2m1_scaled16 against to_e2m1<false> (branch_free of a number) for every finite 16-bit x times 2^k
  uint64_t bad16 = 0, n16 = 0;
  for (int fmt = 0; fmt < 2; ++fmt)
    for (uint32_t h = 0; h < 0x10000u; ++h) {
      const float x = fmt == 0 ? bf16_value(h) : f16_value(h);
      if (!std::isfinite(x)) continue;
      for (int k = -160; k <= 127; ++k) {  // (a multiplier 2^k is finite: numeric_block)
        const float y = x * std::ldexp(1.0f, k);  // (2^k below 2^-149 is 0: y = 0)
        ++n16;
        if (scaled16(y) != branch_free(y) && bad16++ < 8)
          std::printf("%s 0x%04x * 2^%d: %u vs %u\n", fmt ? "f16" : "bf16", h, k, scaled16(y), branch_free(y));
      }
    }
  std::printf("%llu mismatches over %llu 16-bit x * 2^k\n", static_cast<unsigned long long>(bad16),
              static_cast<unsigned long long>(n16));
  uint64_t bad = 0;
  for (uint64_t i = 0; i <= 0xffffffffull; ++i) {
    const float v = from_bits(static_cast<uint32_t>(i));
    if (with_conversion(v) != branch_free(v) && bad++ < 8)
      std::printf("0x%08x: %u vs %u\n", static_cast<uint32_t>(i), with_conversion(v), branch_free(v));
  }
  std::printf("%llu mismatches over 2^32 floats\n", static_cast<unsigned long long>(bad));
  return bad != 0 || bad16 != 0;
}
