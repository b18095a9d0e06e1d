// Reads the dynamic symbol table of a compiled candidate (ELF64 shared object): what it
// imports (for the forbidden-import check) and what it exports (for the entry point).
#pragma once
#include <string>
#include <vector>

namespace leap {

struct DynamicSymbols {
  std::vector<std::string> imports;  // undefined symbols
  std::vector<std::string> exports;  // defined global/weak functions and objects
};

// Throws LeapError when the file is not a readable ELF64 shared object.
DynamicSymbols read_dynamic_symbols(const std::string& path);
// The same from the full symbol table (.symtab): e.g. the kernels of a cubin.
DynamicSymbols read_static_symbols(const std::string& path);

}  // namespace leap
