# SPDX-License-Identifier: MIT
# Runs LAMMPS as a user does, with its output redirected to a file, on an input that ends in a
# rank-local error (tests/plugin/in.error_output), and checks that the message reached that file
# and, from rank 0, log.lammps: LAMMPS' error->one path MPI_Abort()s with the message still in
# stdio buffers, and on ranks other than 0 writes it nowhere (issue 17).
#   -DLMP=... -DPLUGIN=... -DINPUT=... -DPOTENTIAL=... -DELEMENTS="Cu Ni" -DNP=1|2
#   -DMPIEXEC=... -DMPIEXEC_FLAGS=... -DWORK=dir -DEXPECT="regex" [-DEXPECT_LOG=1]
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(cmd "${LMP}" -nocite -in "${INPUT}" -var plugin "${PLUGIN}" -var potential "${POTENTIAL}"
        -var elements ${ELEMENTS} -var px ${NP})
if(NP GREATER 1)
  separate_arguments(flags UNIX_COMMAND "${MPIEXEC_FLAGS}")
  set(cmd "${MPIEXEC}" ${flags} -np ${NP} ${cmd})
endif()
execute_process(COMMAND ${cmd} WORKING_DIRECTORY "${WORK}" OUTPUT_FILE "${WORK}/out.txt" ERROR_FILE "${WORK}/err.txt"
                RESULT_VARIABLE rc TIMEOUT 120)
file(READ "${WORK}/out.txt" out)
file(READ "${WORK}/err.txt" err)
if(rc EQUAL 0)
  message(FATAL_ERROR "LAMMPS exited 0 on an input that must fail\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the error '${EXPECT}' did not reach the redirected output (exit ${rc})\n"
                      "stdout:\n${out}\nstderr:\n${err}")
endif()
if(EXPECT_LOG)
  file(READ "${WORK}/log.lammps" log)
  if(NOT log MATCHES "${EXPECT}")
    message(FATAL_ERROR "the error '${EXPECT}' did not reach log.lammps\nlog.lammps:\n${log}")
  endif()
endif()
message(STATUS "the error reached the user (exit ${rc})")
