# SPDX-License-Identifier: MIT
# ctest trainer.no_std_remove_all: fails if a source of the trainer or of its tests calls
# std::filesystem::remove_all, which a PyPI PyTorch's libtorch.so may answer with a broken copy
# (src/io/atomic_file.hpp, remove_tree, says why). -DROOT=<the source tree>.
file(GLOB_RECURSE _sources "${ROOT}/trainer/*.cpp" "${ROOT}/trainer/*.hpp" "${ROOT}/tests/trainer/*.cpp"
     "${ROOT}/tests/trainer/*.hpp")
set(_found "")
foreach(_source IN LISTS _sources)
  file(STRINGS "${_source}" _lines REGEX "remove_all[ \t]*\\(")
  foreach(_line IN LISTS _lines)
    string(STRIP "${_line}" _line)
    string(APPEND _found "\n  ${_source}: ${_line}")
  endforeach()
endforeach()
if(_found)
  message(FATAL_ERROR "std::filesystem::remove_all in code that links LibTorch; call fastmlip::io::remove_tree "
                      "(src/io/atomic_file.hpp) instead:${_found}")
endif()
list(LENGTH _sources _count)
message(STATUS "${_count} trainer sources checked: none calls remove_all")
