# Each tests/<label>/test_*.c is one ctest executable labelled <label>. Exit status 77 reports a skip
# (e.g. a model file that is absent), which ctest shows as skipped, never as passed.
# tests/lua/*.lua run through `icl script`; tests/cli/*.sh run with bash (ICL=path of the binary).
file(GLOB test_dirs LIST_DIRECTORIES true ${CMAKE_CURRENT_SOURCE_DIR}/tests/*)
foreach(dir ${test_dirs})
  if(NOT IS_DIRECTORY ${dir})
    continue()
  endif()
  get_filename_component(label ${dir} NAME)
  if(label STREQUAL "fuzz")
    continue()
  endif()
  file(GLOB csrcs CONFIGURE_DEPENDS ${dir}/test_*.c)
  foreach(src ${csrcs})
    get_filename_component(tname ${src} NAME_WE)
    if(NOT ICL_VULKAN AND tname MATCHES "^test_vk_")
      continue() # Vulkan op tests need the Vulkan backend (-DICL_VULKAN=ON)
    endif()
    add_executable(${tname} ${src} ${CMAKE_CURRENT_SOURCE_DIR}/tests/testutil.c
      ${CMAKE_CURRENT_SOURCE_DIR}/tests/tools/gguf_edit.c)
    target_include_directories(${tname} PRIVATE ${ICL_DIRS_all} include tests tests/tools)
    target_link_libraries(${tname} PRIVATE icl_lua icl_train icl_host icl_testsupport iclcore icl_cpu icl_vulkan icl_ref)
    add_test(NAME ${label}.${tname} COMMAND ${tname})
    set_tests_properties(${label}.${tname} PROPERTIES LABELS ${label} SKIP_RETURN_CODE 77
      ENVIRONMENT "ICL_SOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR};ICL_TEST=1;ICL_VALIDATION=1"
      WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  endforeach()
endforeach()

file(GLOB lua_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/lua/test_*.lua)
foreach(t ${lua_tests})
  get_filename_component(tname ${t} NAME_WE)
  add_test(NAME lua.${tname} COMMAND icl script ${t})
  set_tests_properties(lua.${tname} PROPERTIES LABELS lua SKIP_RETURN_CODE 77
    ENVIRONMENT "ICL_SOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR};ICL_TEST=1"
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
endforeach()

# A tiny random model for the CLI tests (optionally poisoned or renamed): ICL_TINY_MODEL in their environment.
add_executable(icl_tiny_model tests/tools/tiny_model.c tests/tools/gguf_edit.c)
target_include_directories(icl_tiny_model PRIVATE ${ICL_DIRS_all} tests/tools)
target_link_libraries(icl_tiny_model PRIVATE icl_testsupport iclcore)

file(GLOB cli_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/cli/test_*.sh)
foreach(t ${cli_tests})
  get_filename_component(tname ${t} NAME_WE)
  add_test(NAME cli.${tname} COMMAND bash ${t})
  set_tests_properties(cli.${tname} PROPERTIES LABELS cli SKIP_RETURN_CODE 77
    ENVIRONMENT "ICL=$<TARGET_FILE:icl>;ICL_TINY_MODEL=$<TARGET_FILE:icl_tiny_model>;ICL_SOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR};ICL_BUILD_DIR=${CMAKE_BINARY_DIR};ICL_TEST=1"
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
endforeach()

if(ICL_FUZZ)
  file(GLOB fuzz_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/fuzz/fuzz_*.c)
  foreach(src ${fuzz_srcs})
    get_filename_component(fname ${src} NAME_WE)
    add_executable(${fname} ${src})
    target_include_directories(${fname} PRIVATE ${ICL_DIRS_all})
    target_compile_options(${fname} PRIVATE -fsanitize=fuzzer)
    target_compile_definitions(${fname} PRIVATE ICL_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}") # run outside ctest
    target_link_options(${fname} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(${fname} PRIVATE icl_lua icl_train icl_host icl_testsupport iclcore)
  endforeach()
endif()

# The same fixtures in FAST precision (int8 activations), against that mode's stated error.
if(TEST model.test_fixtures)
  add_test(NAME model.test_fixtures_fast COMMAND test_fixtures)
  set_tests_properties(model.test_fixtures_fast PROPERTIES LABELS model SKIP_RETURN_CODE 77
    ENVIRONMENT "ICL_SOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR};ICL_TEST=1;ICL_FIXTURE_PRECISION=fast"
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
endif()

# The tiny-model forward on Vulkan's GPU-shaped kernels (query-block attention among them) whatever the device:
# lavapipe picks the CPU-shaped family by default.
if(TEST model.test_forward_tiny AND ICL_VULKAN)
  add_test(NAME model.test_forward_tiny_gpu_shape COMMAND test_forward_tiny vulkan)
  set_tests_properties(model.test_forward_tiny_gpu_shape PROPERTIES LABELS model SKIP_RETURN_CODE 77
    ENVIRONMENT "ICL_SOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR};ICL_TEST=1;ICL_VALIDATION=1;ICL_VK_SHAPE=gpu"
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
endif()

# Real-model tests are heavy (minutes at -O0): the sanitizer run skips them with -LE heavy; the release run
# covers them, and the tiny-model tests exercise the same code under the sanitizers.
foreach(t model.test_fixtures model.test_fixtures_fast cli.test_perplexity cli.test_experiments model.test_testmodel_like cli.test_icl_circuit lua.test_logits_select)
  if(TEST ${t})
    get_test_property(${t} LABELS labels)
    set_tests_properties(${t} PROPERTIES LABELS "${labels};heavy")
  endif()
endforeach()

# tests/cli/test_olsson.sh trains four small models and runs SmolLM2 (induction heads, Olsson et al.): heavy.
if(TEST cli.test_olsson)
  get_test_property(cli.test_olsson LABELS olsson_labels)
  set_tests_properties(cli.test_olsson PROPERTIES LABELS "${olsson_labels};heavy" TIMEOUT 600)
endif()

# The op table (tests/ops/test_backend_ops.c): under the sanitizers its "big" shape class (the same code paths at
# model-sized prefill chunks) is dropped, as --quick does.
if(ICL_SANITIZE AND TEST ops.test_backend_ops)
  set_tests_properties(ops.test_backend_ops PROPERTIES
    ENVIRONMENT "ICL_SOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR};ICL_TEST=1;ICL_VALIDATION=1;ICL_OPS_QUICK=1")
endif()

# tests/cli/test_sweep_slurm.sh brings up a single-node Slurm (root, ports 16817-16818) and runs park_grid --quick
# through it (issue 39): its own label, heavy for the real model and the daemons; one at a time.
if(TEST cli.test_sweep_slurm)
  set_tests_properties(cli.test_sweep_slurm PROPERTIES LABELS "cli;slurm;heavy" TIMEOUT 400 RUN_SERIAL ON)
endif()
