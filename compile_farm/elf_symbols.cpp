#include "compile_farm/elf_symbols.h"

#include <elf.h>

#include <cstring>

#include "common/error.h"
#include "common/paths.h"

namespace leap {

namespace {

DynamicSymbols read_symbols(const std::string& path, uint32_t table) {
  const std::string data = read_file(path);
  auto bad = [&](const char* why) { return LeapError(path + ": not a valid shared object (" + why + ")"); };
  if (data.size() < sizeof(Elf64_Ehdr) || std::memcmp(data.data(), ELFMAG, SELFMAG) != 0) throw bad("no ELF header");
  Elf64_Ehdr eh;
  std::memcpy(&eh, data.data(), sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) throw bad("not ELF64");
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
      eh.e_shoff + static_cast<uint64_t>(eh.e_shnum) * sizeof(Elf64_Shdr) > data.size())
    throw bad("section table out of range");
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, data.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof sh);
    return sh;
  };
  DynamicSymbols out;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = section(i);
    if (sh.sh_type != table) continue;
    if (sh.sh_link >= eh.e_shnum || sh.sh_offset + sh.sh_size > data.size()) throw bad("dynsym out of range");
    Elf64_Shdr strtab = section(sh.sh_link);
    if (strtab.sh_offset + strtab.sh_size > data.size()) throw bad("dynstr out of range");
    size_t count = sh.sh_size / sizeof(Elf64_Sym);
    for (size_t k = 1; k < count; ++k) {
      Elf64_Sym sym;
      std::memcpy(&sym, data.data() + sh.sh_offset + k * sizeof(Elf64_Sym), sizeof sym);
      if (sym.st_name >= strtab.sh_size) throw bad("symbol name out of range");
      const char* name = data.data() + strtab.sh_offset + sym.st_name;
      size_t max_len = strtab.sh_size - sym.st_name;
      std::string s(name, strnlen(name, max_len));
      int bind = ELF64_ST_BIND(sym.st_info);
      if (sym.st_shndx == SHN_UNDEF) out.imports.push_back(s);
      else if (bind == STB_GLOBAL || bind == STB_WEAK) out.exports.push_back(s);
    }
  }
  return out;
}

}  // namespace

DynamicSymbols read_dynamic_symbols(const std::string& path) { return read_symbols(path, SHT_DYNSYM); }
DynamicSymbols read_static_symbols(const std::string& path) { return read_symbols(path, SHT_SYMTAB); }

}  // namespace leap
