// jax_tmem: scalar conversions between float and the storage types, for host code (the CPU
// reference handler and tests). Round-to-nearest-even everywhere, NaN preserved.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "jax_tmem/dtypes.h"

namespace jax_tmem::host {

inline float bits_to_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float bf16_to_float(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline uint16_t float_to_f16(float f) {
  uint32_t u = float_to_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;                 // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;                // rounds to >= 65520 -> inf
  if (abs < 0x38800000u) {                                      // below 2^-14: subnormal or zero
    // value in units of 2^-24, rounded to nearest even
    float v = bits_to_float(abs) * 16777216.0f;
    float r = std::nearbyint(v);                                // default rounding mode: RNE
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t mant = abs & 0x7fffffu, exp = (abs >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

// ---- decoding any element type of dtypes.def, from its numpy name -------------------------------------
// The storage format of a table type, read from its name the way ml_dtypes names them:
// "float<bits>_e<E>m<M>[fn|fnu]", bfloat16 / float16 / float32 (IEEE), int<bits> / uint<bits>. So a new
// row in dtypes.def decodes on the CPU with no code here.
struct Format {
  enum Kind : int8_t { kInvalid, kInt, kUInt, kIeee, kFiniteNaN, kFinite, kExponent } kind = kInvalid;
  int bits = 0, e = 0, m = 0;
};

inline Format format_of(DType t) {
  const char* n = dtype_name(t);
  Format f;
  f.bits = dtype_bits(t);
  int bits = 0, e = 0, m = 0, used = 0;
  char suffix[8] = {0};
  if (std::strcmp(n, "float32") == 0) return {Format::kIeee, 32, 8, 23};
  if (std::strcmp(n, "bfloat16") == 0) return {Format::kIeee, 16, 8, 7};
  if (std::strcmp(n, "float16") == 0) return {Format::kIeee, 16, 5, 10};
  if (std::sscanf(n, "int%d%n", &bits, &used) == 1 && n[used] == 0) return {Format::kInt, bits, 0, 0};
  if (std::sscanf(n, "uint%d%n", &bits, &used) == 1 && n[used] == 0) return {Format::kUInt, bits, 0, 0};
  if (std::sscanf(n, "float%d_e%dm%d%n", &bits, &e, &m, &used) == 3 && 1 + e + m >= bits - 1) {
    std::strncpy(suffix, n + used, sizeof(suffix) - 1);
    f.e = e;
    f.m = m;
    if (suffix[0] == 0) f.kind = Format::kIeee;                                  // e5m2: inf and NaNs
    else if (std::strcmp(suffix, "fn") == 0) f.kind = bits == 8 ? Format::kFiniteNaN : Format::kFinite;
    else if (std::strcmp(suffix, "fnu") == 0 && m == 0) f.kind = Format::kExponent;  // e8m0fnu
  }
  return f;
}

// The value of the element whose storage bits are `raw` (the low f.bits bits), as float (exact for
// every type of the table). kFiniteNaN: no infinities, all-ones is NaN (e4m3fn); kFinite: no
// infinities or NaN (fp6, fp4); kExponent: unsigned 2^(raw - bias), all-ones NaN (e8m0fnu).
inline float decode(const Format& f, uint32_t raw) {
  switch (f.kind) {
    case Format::kInt: {
      const uint32_t sign = 1u << (f.bits - 1);
      return static_cast<float>(static_cast<int32_t>((raw ^ sign) - sign));
    }
    case Format::kUInt: return static_cast<float>(raw);
    case Format::kExponent:
      return raw == (1u << f.bits) - 1 ? NAN : std::ldexp(1.0f, static_cast<int>(raw) - ((1 << (f.e - 1)) - 1));
    case Format::kInvalid: return NAN;
    default: break;
  }
  if (f.bits == 32) return bits_to_float(raw);
  const uint32_t man = raw & ((1u << f.m) - 1), emax = (1u << f.e) - 1;
  const uint32_t exp = (raw >> f.m) & emax;
  const bool neg = (raw >> (f.bits - 1)) & 1u;
  const int bias = (1 << (f.e - 1)) - 1;
  float r;
  if (f.kind == Format::kIeee && exp == emax) r = man ? NAN : INFINITY;
  else if (f.kind == Format::kFiniteNaN && exp == emax && man == (1u << f.m) - 1) r = NAN;
  else if (exp == 0) r = std::ldexp(static_cast<float>(man), 1 - bias - f.m);
  else r = std::ldexp(static_cast<float>(man | (1u << f.m)), static_cast<int>(exp) - bias - f.m);
  return neg ? -r : r;
}

}  // namespace jax_tmem::host
