# Warnings as errors on our own code only; third-party headers come in as SYSTEM includes.
function(flashdesk_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow=local -Wnon-virtual-dtor -Werror>)
  endif()
endfunction()
