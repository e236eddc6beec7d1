# Warnings, sanitizer build type and test helpers shared by every target.

set(WHARF_WARNINGS -Wall -Wextra -Wshadow -Wformat=2 -Wcast-qual -Wpointer-arith
                   -Wno-missing-field-initializers)

# Sanitize = ASan + UBSan, no recovery so any report fails the test. -Og -g1 (line tables:
# reports still name file and line) builds in half the time of -O1 -g, which matters in CI.
set(CMAKE_CXX_FLAGS_SANITIZE "-Og -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all")
set(CMAKE_C_FLAGS_SANITIZE "${CMAKE_CXX_FLAGS_SANITIZE}")
set(CMAKE_EXE_LINKER_FLAGS_SANITIZE "-fsanitize=address,undefined")
set(CMAKE_SHARED_LINKER_FLAGS_SANITIZE "-fsanitize=address,undefined")

# wharf_target_defaults(<target>): warnings and include root for project code.
function(wharf_target_defaults target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${WHARF_WARNINGS}>)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
endfunction()

# wharf_sanitizer_needs(<target>...): targets that the tests run in the sanitizer tree (every
# label but `e2e` and `nosan`) need built. scripts/test.sh builds only these there, through
# the target wharf_sanitized_tests (tests/CMakeLists.txt): no sanitized test runs the tools.
function(wharf_sanitizer_needs)
  set_property(GLOBAL APPEND PROPERTY WHARF_SANITIZER_NEEDS ${ARGN})
endfunction()

# wharf_use_test_pch(<target>): compiles <target> with the tests' precompiled header
# (tests/CMakeLists.txt defines wharf_test_pch where the compiler is GCC). The target gets
# spdlog's and GoogleTest's compile definitions, since a header precompiled under other
# macros would be silently ignored.
function(wharf_use_test_pch target)
  if(TARGET wharf_test_pch)
    target_link_libraries(${target} PRIVATE spdlog::spdlog GTest::gtest)
    target_precompile_headers(${target} REUSE_FROM wharf_test_pch)
  endif()
endfunction()

# wharf_add_test(<name> SOURCES ... LIBS ...): a GoogleTest binary registered with CTest.
function(wharf_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  if("unit" IN_LIST T_LABELS AND NOT WHARF_UNIT_TESTS)
    return()
  endif()
  add_executable(${name} ${T_SOURCES})
  wharf_target_defaults(${name})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  wharf_use_test_pch(${name})
  if(NOT "e2e" IN_LIST T_LABELS AND NOT "nosan" IN_LIST T_LABELS)
    wharf_sanitizer_needs(${name})
  elseif(CMAKE_BUILD_TYPE STREQUAL "Sanitize")
    # Never built there (wharf_sanitized_tests), so not registered either: CTest would list
    # it as <name>_NOT_BUILT, a failure no label excludes.
    return()
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 30 NO_PRETTY_VALUES PROPERTIES LABELS "${T_LABELS}" TIMEOUT 120)
endfunction()
include(GoogleTest)
