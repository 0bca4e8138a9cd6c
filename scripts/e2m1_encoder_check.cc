// Dev check (issue 14, the fused quantize): the branch-free e2m1 encoder of kernels/mx_quantize.cuh
// (to_e2m1: rint(2a) below 1 as the low bits of a + 2^22) against the form it replaced (rint(2a) by a
// float-to-int conversion), on the host, over all 2^32 float bit patterns. Both are written here in
// plain C++ with the same operations (the device's __fadd_rn and __float2int_rn round to nearest even as
// the host's default mode does). Also to_e2m1_scaled16 (MXFP4 of 16-bit x: y = x * 2^k) against to_e2m1
// for every finite bf16 / f16 x times every power of two. And the column-pair kernel's encoders (2026-11-27):
// e2m1_mag (the magnitude code in bits 0-2, bits 3-7 zero) against to_e2m1<false> over all 2^32 floats that
// are numbers, e2m1_mag_scaled16 of x * 2^(k - 126) against to_e2m1_scaled16 of x * 2^k for k >= -23, and
// e2m1_pair_byte's low byte (signs from x's bits by a mad.hi) against the two codes put together.
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

static uint32_t mag(float y) {  // e2m1_mag
  const float a = std::fmin(std::fabs(y), 6.0f);
  const uint32_t b = bits(a);
  volatile float magic = 4194304.0f;
  const uint32_t lo = bits(a + magic);
  const uint32_t hi = (b + (0x1fffffu - 0x3f000000u) + ((b >> 22) & 1u)) >> 22;
  return a < 1.0f ? lo : hi;
}

static uint32_t mag_scaled16(float yt) {  // e2m1_mag_scaled16
  const uint32_t b = bits(std::fmin(std::fabs(yt), 0x1.8p-124f));
  return (b + 0x1fffffu + ((b >> 22) & 1u)) >> 22;
}

static uint32_t pair_byte(uint32_t c0, uint32_t c1, uint32_t s) {  // e2m1_pair_byte
  const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(s & 0x80008000u) * 0x00100100u) >> 32);
  return hi + (c0 + (c1 << 4));
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
  // e2m1_mag_scaled16 with the multiplier's 2^-126 folded in (k >= -23: 2^(k - 126) is exact)
  uint64_t bad_f = 0;
  for (int fmt = 0; fmt < 2; ++fmt)
    for (uint32_t h = 0; h < 0x10000u; ++h) {
      const float x = fmt == 0 ? bf16_value(h) : f16_value(h);
      if (!std::isfinite(x)) continue;
      for (int k = -23; k <= 127; ++k) {
        volatile float m = std::ldexp(1.0f, k), mt = std::ldexp(1.0f, k - 126);
        const uint32_t want = scaled16(x * m), got = mag_scaled16(x * mt);
        const uint32_t sign = h >> 12 & 0x8u;  // x's sign bit (bit 15 of either type)
        if ((got > 7 || (got | sign) != want) && bad_f++ < 8)
          std::printf("fused %s 0x%04x * 2^%d: %u vs %u\n", fmt ? "f16" : "bf16", h, k, got | sign, want);
      }
    }
  std::printf("%llu mismatches of e2m1_mag_scaled16\n", static_cast<unsigned long long>(bad_f));
  // e2m1_pair_byte: every pair of codes (with e2m1_mag's junk above bit 7) and signs
  uint64_t bad_p = 0;
  const float probes[] = {0.0f, 0.2f, 0.25f, 0.3f, 0.75f, 0.9f, 1.0f, 1.25f, 1.75f, 2.5f, 3.0f, 3.5f, 5.0f, 6.0f, 100.0f};
  for (float u : probes)
    for (float v : probes)
      for (uint32_t sg = 0; sg < 4; ++sg) {
        const uint32_t s = (sg & 1 ? 0x8000u : 0u) | (sg & 2 ? 0x80000000u : 0u) | 0x12345u;  // + other bits of x
        const uint32_t want = (branch_free(u) | (sg & 1 ? 8u : 0u)) | (branch_free(v) | (sg & 2 ? 8u : 0u)) << 4;
        if ((pair_byte(mag(u), mag(v), s) & 0xffu) != want && bad_p++ < 8)
          std::printf("pair %g %g signs %u: 0x%02x vs 0x%02x\n", u, v, sg, pair_byte(mag(u), mag(v), s) & 0xffu, want);
      }
  std::printf("%llu mismatches of e2m1_pair_byte\n", static_cast<unsigned long long>(bad_p));
  uint64_t bad = 0, bad_m = 0;
  for (uint64_t i = 0; i <= 0xffffffffull; ++i) {
    const float v = from_bits(static_cast<uint32_t>(i));
    if (with_conversion(v) != branch_free(v) && bad++ < 8)
      std::printf("0x%08x: %u vs %u\n", static_cast<uint32_t>(i), with_conversion(v), branch_free(v));
    if (v == v) {  // e2m1_mag: to_e2m1<false>'s magnitude in bits 0-2, bits 3-7 zero
      const uint32_t c = mag(v) & 0xffu;
      if (c != (branch_free(v) & 7u) && bad_m++ < 8) std::printf("mag 0x%08x: %u vs %u\n", static_cast<uint32_t>(i), c, branch_free(v) & 7u);
    }
  }
  std::printf("%llu mismatches of e2m1_mag over the 2^32 floats\n", static_cast<unsigned long long>(bad_m));
  std::printf("%llu mismatches over 2^32 floats\n", static_cast<unsigned long long>(bad));
  return bad != 0 || bad16 != 0 || bad_f != 0 || bad_p != 0 || bad_m != 0;
}
