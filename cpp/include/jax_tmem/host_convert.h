// jax_tmem: scalar conversions between float and the storage types, for host code (the CPU
// reference handler and tests). Round-to-nearest-even everywhere, NaN preserved.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

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

inline float f16_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));  // inf / nan
  if (exp == 0) {
    if (man == 0) return bits_to_float(sign);
    float v = std::ldexp(static_cast<float>(man), -24);  // subnormal
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
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

// float8_e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa; no infinities; S.1111.111 is NaN.
inline float e4m3_to_float(uint8_t v) {
  uint32_t sign = v >> 7, exp = (v >> 3) & 0xfu, man = v & 0x7u;
  float r;
  if (exp == 0xf && man == 0x7) r = NAN;
  else if (exp == 0) r = std::ldexp(static_cast<float>(man), -9);
  else r = std::ldexp(1.0f + man / 8.0f, static_cast<int>(exp) - 7);
  return sign ? -r : r;
}

// float8_e5m2: the upper byte of an IEEE half.
inline float e5m2_to_float(uint8_t v) { return f16_to_float(static_cast<uint16_t>(v) << 8); }

}  // namespace jax_tmem::host
