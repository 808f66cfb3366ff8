# Fails the build when an ISA-specific object (*_avx2.cpp, *_avx512.cpp) defines a weak symbol.
# Such a symbol is an inline function or template instantiated there and compiled for that ISA;
# the linker may keep that copy for the baseline code as well, which would then crash with
# SIGILL on a CPU without the ISA. Run as: cmake -DNM=nm -DOBJECTS=a.o;b.o -P CheckIsaObjects.cmake
foreach(obj IN LISTS OBJECTS)
  if(NOT obj MATCHES "_avx(2|512)\\.cpp\\.o(bj)?$")
    continue()
  endif()
  execute_process(COMMAND ${NM} -C --defined-only ${obj} OUTPUT_VARIABLE symbols
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${obj}")
  endif()
  string(REGEX MATCHALL "[^\n]* [WVu] [^\n]*" weak "${symbols}")
  list(FILTER weak EXCLUDE REGEX "DW\\.ref\\.__gxx_personality_v0")
  # Type information is data, not code: UBSan's function checks (clang) emit it for function types.
  list(FILTER weak EXCLUDE REGEX " V typeinfo (name )?for ")
  if(weak)
    string(REPLACE ";" "\n  " listed "${weak}")
    message(FATAL_ERROR "${obj} defines weak symbols compiled for its ISA (keep library "
                        "templates and shared inline functions out of ISA files):\n  ${listed}")
  endif()
endforeach()
