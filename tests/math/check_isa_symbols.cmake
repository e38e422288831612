# SPDX-License-Identifier: MIT
# ctest script (tests/math/CMakeLists.txt): the ISA translation units of math/isa/ may define
# exactly one external symbol each, their kernel table. Any other global or weak definition
# (an inline function or template instantiation with external linkage) could be merged by the
# linker with the baseline unit's copy, and an AVX-512 body would then run on CPUs without it.
#   cmake -DNM=nm -DLIBRARY=libfastmlip_core.a -P check_isa_symbols.cmake
execute_process(COMMAND "${NM}" -C --defined-only "${LIBRARY}" OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} ${LIBRARY} failed (${rc})")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(member "")
set(units 0)
set(bad "")
foreach(line IN LISTS lines)
  if(line MATCHES "^(.*\\.o):$")
    set(member "${CMAKE_MATCH_1}")
    if(member MATCHES "^(gemm|elementwise)_[a-z0-9]+\\.cpp\\.o$")
      math(EXPR units "${units} + 1")
    endif()
    continue()
  endif()
  if(NOT member MATCHES "^(gemm|elementwise)_([a-z0-9]+)\\.cpp\\.o$")
    continue()
  endif()
  set(table "fastmlip::math::isa::${CMAKE_MATCH_1}_${CMAKE_MATCH_2}")
  # AddressSanitizer gives every instrumented global a data symbol of its own, its ODR
  # indicator (__odr_asan.<mangled name>, which nm -C leaves mangled): data, not code, and
  # named after the table, so it is the table's.
  string(LENGTH "${CMAKE_MATCH_1}_${CMAKE_MATCH_2}" table_len)
  set(asan_indicator "__odr_asan._ZN8fastmlip4math3isa${table_len}${CMAKE_MATCH_1}_${CMAKE_MATCH_2}E")
  # "ADDRESS TYPE NAME": lower-case types are local; upper-case (and u, v, w) are not.
  if(line MATCHES "^[0-9a-fA-F]+ ([A-Za-z]) (.*)$")
    set(type "${CMAKE_MATCH_1}")
    set(name "${CMAKE_MATCH_2}")
    # clang's UndefinedBehaviorSanitizer (-fsanitize=function) gives each function type whose
    # pointer is called a weak typeinfo object ("typeinfo for void (float const*, ...)"): data
    # that is the same in every unit, never code the linker could swap for an AVX-512 body.
    if(type STREQUAL "V" AND name MATCHES "^typeinfo (name )?for [^(]*\\(.*\\)$")
      continue()
    endif()
    if(type MATCHES "^[A-Zuvw]$" AND NOT name STREQUAL table AND NOT name STREQUAL asan_indicator)
      string(APPEND bad "\n  ${member}: ${type} ${name}")
    endif()
  endif()
endforeach()
if(units LESS 2)
  message(FATAL_ERROR "no ISA units (gemm_*.cpp.o, elementwise_*.cpp.o) found in ${LIBRARY}")
endif()
if(bad)
  message(FATAL_ERROR "ISA units define symbols other than their table:${bad}")
endif()
message(STATUS "${units} ISA units, each defining only its table")
