// jax_tmem: the cubins of this extension's fatbinaries (kernel_images.cc), for XLA FFI's record stage.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace jax_tmem::images {

struct Cubin {
  int sm;                     // the SM version it was compiled for (90, 100, 103)
  const unsigned char* data;  // the ELF image, in this extension's loaded fatbinary (stable address)
  size_t size;
};

// Every uncompressed cubin of this extension (scanned once); empty with the reason in *why.
const std::vector<Cubin>& cubins(std::string* why);

// Whether the cubin defines the function (kernel) `name` (its mangled name).
bool defines(const Cubin& c, const char* name);

// The sm_`sm` cubin that defines `name`, or null with the reason in *why.
const Cubin* find(const char* name, int sm, std::string* why);

}  // namespace jax_tmem::images
