# The run path calls down only (docs/architecture.md, "The run path"): each file below is a level, and a file
# may call the functions of its own level and the levels under it, never those above. Run with -P (ROOT): it
# collects the non-static functions each file defines, then fails on any call of a higher level's function
# (which also means no icl_session_ call in src/hooks*.c and none of the lifecycle from resolve/capture/apply).
# Without -P it adds the ctest test unit.run_path.

set(RUN_PATH_LEVELS
  "src/core/hook_points.c"
  "src/core/hooks_sites.c"
  "src/core/hooks_resolve.c src/core/hooks_capture.c src/core/hooks_apply.c"
  "src/core/hooks.c"
  "src/core/forward.c"
  "src/core/logits_select.c"
  "src/core/session.c")

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_policy(VERSION 3.20)
  set(level 0)
  foreach(files ${RUN_PATH_LEVELS}) # pass 1: the functions each level defines
    string(REPLACE " " ";" files "${files}")
    set(defs_${level} "")
    foreach(f ${files})
      file(STRINGS ${ROOT}/${f} lines REGEX "^[a-z][a-z0-9_ *]*[ *](icl_[a-z0-9_]+)\\(")
      foreach(l ${lines})
        if(NOT l MATCHES "^static" AND l MATCHES "[ *](icl_[a-z0-9_]+)\\(")
          list(APPEND defs_${level} ${CMAKE_MATCH_1})
        endif()
      endforeach()
    endforeach()
    set(files_${level} ${files})
    math(EXPR level "${level} + 1")
  endforeach()
  math(EXPR top "${level} - 1")
  set(bad 0)
  set(n_calls 0)
  foreach(lv RANGE ${top}) # pass 2: every call of a function defined above the file's level
    foreach(f ${files_${lv}})
      file(READ ${ROOT}/${f} text)
      string(REGEX MATCHALL "icl_[a-z0-9_]+\\(" calls "${text}")
      list(REMOVE_DUPLICATES calls)
      foreach(c ${calls})
        string(REPLACE "(" "" c "${c}")
        math(EXPR n_calls "${n_calls} + 1")
        math(EXPR above "${lv} + 1")
        if(above GREATER top)
          continue()
        endif()
        foreach(hi RANGE ${above} ${top})
          if(c IN_LIST defs_${hi})
            message("${f}: calls ${c}, which a higher level of the run path defines (${files_${hi}})")
            set(bad 1)
          endif()
        endforeach()
      endforeach()
    endforeach()
  endforeach()
  if(bad)
    message(FATAL_ERROR "run-path check failed: a file calls up the run path (cmake/check_run_path.cmake)")
  endif()
  message("run-path check: ${level} levels, ${n_calls} distinct calls, none upward")
  return()
endif()

add_test(NAME unit.run_path COMMAND ${CMAKE_COMMAND} -DROOT=${CMAKE_CURRENT_SOURCE_DIR}
  -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/check_run_path.cmake)
set_tests_properties(unit.run_path PROPERTIES LABELS unit)
