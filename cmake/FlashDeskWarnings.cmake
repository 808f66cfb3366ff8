# Warnings as errors on our own code only; third-party headers come in as SYSTEM includes.
# FLASHDESK_WERROR=OFF keeps them warnings, for a compiler this project is not built with in CI
# (the GPU machine's: a new warning there must not cost its one build).
option(FLASHDESK_WERROR "Treat warnings in FlashDesk's own code as errors" ON)
function(flashdesk_warnings target)
  # -Wshadow=local is GCC's spelling; clang (the fuzz preset) calls it -Wshadow-uncaptured-local.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    set(shadow -Wshadow=local)
  else()
    set(shadow -Wshadow-uncaptured-local)
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra ${shadow} -Wnon-virtual-dtor>)
    if(FLASHDESK_WERROR)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
    endif()
  endif()
  # GCC 12 reports -Wrestrict false positives inside libstdc++'s string concatenation at -O3
  # (GCC bug 105329); the warning stays on for every other compiler.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
  endif()
endfunction()
