# SPDX-License-Identifier: MIT
# Regenerates the dataset with the seed of examples.cuni_generate and compares the bytes.
execute_process(COMMAND "${GENERATOR}" --output "${OUTPUT}" --seed 7 RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "generator failed with ${rc}")
endif()
file(SHA256 "${REFERENCE}" a)
file(SHA256 "${OUTPUT}" b)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "same seed, different dataset: ${REFERENCE} and ${OUTPUT} differ")
endif()
message(STATUS "reproducible: ${a}")
