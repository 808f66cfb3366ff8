# Warnings as errors on our own code only; third-party headers come in as SYSTEM includes.
function(flashdesk_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow=local -Wnon-virtual-dtor -Werror>)
  elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # Clang has no -Wshadow=local; -Wshadow-uncaptured-local is its closest match.
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow-uncaptured-local -Wnon-virtual-dtor -Werror>)
  endif()
endfunction()
