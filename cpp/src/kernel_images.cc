// jax_tmem: the cubin (ELF image) holding a kernel, found in this extension's own fatbinaries, for XLA FFI's
// record stage (record.cc), which creates kernel nodes from an image and a kernel name.
//
// Where the images are: nvcc puts each translation unit's fatbinary in the .nv_fatbin section and a wrapper
// {magic 0x466243b1, version, fatbinary address, ...} per unit in .nvFatBinSegment, which the CUDA runtime
// registers at load. A fatbinary is a header {magic 0xBA55ED50, u16 version, u16 header size, u64 size}
// followed by entries {u16 kind (2: ELF), u16 version, u32 header size, u64 payload size, ..., u32 SM
// version at byte 28} each followed by its payload: a cubin where the payload starts with the ELF magic
// (uncompressed: what nvcc 13 writes by default, and what the build asks for with --no-compress).
// Section headers are not loaded, so they are read from the file dladdr names; the wrappers and fatbinaries
// are read in memory (their addresses are what XLA keys its module cache on: stable for the process).
#include <dlfcn.h>
#include <elf.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "jax_tmem/kernel_images.h"

namespace jax_tmem::images {
namespace {

constexpr uint32_t kWrapperMagic = 0x466243b1u, kFatbinMagic = 0xBA55ED50u;

struct Wrapper {
  int32_t magic, version;
  const unsigned char* data;
  const void* filename_or_fatbins;
};

// The load address and in-memory range of section `name` of the object that holds this function.
bool loaded_section(const char* name, const unsigned char** start, size_t* size, std::string* why) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&loaded_section), &info) == 0 || info.dli_fname == nullptr) {
    *why = "dladdr found no file for this extension";
    return false;
  }
  FILE* f = std::fopen(info.dli_fname, "rb");
  if (f == nullptr) {
    *why = std::string("cannot open ") + info.dli_fname;
    return false;
  }
  bool ok = false;
  Elf64_Ehdr eh{};
  std::vector<Elf64_Shdr> sh;
  std::vector<char> names;
  if (std::fread(&eh, sizeof(eh), 1, f) == 1 && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shstrndx < eh.e_shnum) {
    sh.resize(eh.e_shnum);
    if (std::fseek(f, static_cast<long>(eh.e_shoff), SEEK_SET) == 0 &&
        std::fread(sh.data(), sizeof(Elf64_Shdr), sh.size(), f) == sh.size()) {
      const Elf64_Shdr& s = sh[eh.e_shstrndx];
      names.resize(s.sh_size + 1, '\0');
      ok = std::fseek(f, static_cast<long>(s.sh_offset), SEEK_SET) == 0 &&
           std::fread(names.data(), 1, s.sh_size, f) == s.sh_size;
    }
  }
  std::fclose(f);
  if (!ok) {
    *why = std::string("cannot read the section headers of ") + info.dli_fname;
    return false;
  }
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_name < names.size() && std::strcmp(names.data() + s.sh_name, name) == 0 && s.sh_addr != 0) {
      *start = static_cast<const unsigned char*>(info.dli_fbase) + s.sh_addr;
      *size = s.sh_size;
      return true;
    }
  }
  *why = std::string("no ") + name + " section in " + info.dli_fname;
  return false;
}

template <typename T>
T read(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::vector<Cubin> scan(std::string* why) {
  std::vector<Cubin> out;
  const unsigned char* seg = nullptr;
  size_t seg_size = 0;
  if (!loaded_section(".nvFatBinSegment", &seg, &seg_size, why)) return out;
  bool compressed = false;
  for (size_t w = 0; w + sizeof(Wrapper) <= seg_size; w += sizeof(Wrapper)) {
    const Wrapper wr = read<Wrapper>(seg + w);
    if (static_cast<uint32_t>(wr.magic) != kWrapperMagic || wr.data == nullptr) continue;
    const unsigned char* fb = wr.data;
    if (read<uint32_t>(fb) != kFatbinMagic) continue;
    const uint16_t header = read<uint16_t>(fb + 6);
    const uint64_t total = read<uint64_t>(fb + 8);
    for (uint64_t p = header; p + 32 <= header + total;) {
      const unsigned char* e = fb + p;
      const uint16_t kind = read<uint16_t>(e);
      const uint32_t eh = read<uint32_t>(e + 4);
      const uint64_t payload = read<uint64_t>(e + 8);
      const uint32_t sm = read<uint32_t>(e + 28);
      if (eh < 32 || payload == 0) break;
      if (kind == 2) {
        if (std::memcmp(e + eh, ELFMAG, SELFMAG) == 0)
          out.push_back(Cubin{static_cast<int>(sm), e + eh, static_cast<size_t>(payload)});
        else
          compressed = true;
      }
      p += eh + payload;
    }
  }
  if (out.empty())
    *why = compressed ? "the extension's cubins are compressed (build with nvcc --no-compress)"
                      : "no cubin in the extension's fatbinaries";
  return out;
}

}  // namespace

const std::vector<Cubin>& cubins(std::string* why) {
  static std::once_flag once;
  static std::vector<Cubin> all;
  static std::string reason;
  std::call_once(once, [] { all = scan(&reason); });
  if (all.empty() && why != nullptr) *why = reason;
  return all;
}

bool defines(const Cubin& c, const char* name) {
  const unsigned char* d = c.data;
  if (c.size < sizeof(Elf64_Ehdr)) return false;
  const Elf64_Ehdr eh = read<Elf64_Ehdr>(d);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
      eh.e_shoff + uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr) > c.size)
    return false;
  for (int i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr s = read<Elf64_Shdr>(d + eh.e_shoff + uint64_t(i) * sizeof(Elf64_Shdr));
    if (s.sh_type != SHT_SYMTAB || s.sh_link >= eh.e_shnum || s.sh_offset + s.sh_size > c.size) continue;
    const Elf64_Shdr str = read<Elf64_Shdr>(d + eh.e_shoff + uint64_t(s.sh_link) * sizeof(Elf64_Shdr));
    if (str.sh_offset + str.sh_size > c.size) continue;
    const char* strtab = reinterpret_cast<const char*>(d + str.sh_offset);
    for (uint64_t o = 0; o + sizeof(Elf64_Sym) <= s.sh_size; o += sizeof(Elf64_Sym)) {
      const Elf64_Sym sym = read<Elf64_Sym>(d + s.sh_offset + o);
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF || sym.st_name >= str.sh_size)
        continue;
      if (std::strncmp(strtab + sym.st_name, name, str.sh_size - sym.st_name) == 0) return true;
    }
  }
  return false;
}

const Cubin* find(const char* name, int sm, std::string* why) {
  const std::vector<Cubin>& all = cubins(why);
  for (const Cubin& c : all)
    if (c.sm == sm && defines(c, name)) return &c;
  if (!all.empty() && why != nullptr)
    *why = std::string("no sm_") + std::to_string(sm) + " cubin of this extension defines " + name;
  return nullptr;
}

}  // namespace jax_tmem::images
