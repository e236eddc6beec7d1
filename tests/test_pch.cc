// The translation unit that owns tests/test_pch.h's precompiled form; every test target
// reuses it (wharf_use_test_pch in cmake/WharfHelpers.cmake). It compiles to nothing.
