# find_package(grit) against the installed grit Python package:
#   cmake -Dgrit_DIR=$(python -c "import grit; print(grit.get_cmake_dir())") ...
# or CMAKE_PREFIX_PATH=$(python -c "import grit; print(grit.get_cmake_dir())").
# Defines the imported target grit::grit (header grit.h, library libgrit).
get_filename_component(_grit_lib "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
get_filename_component(_grit_include "${_grit_lib}/../include" ABSOLUTE)
find_library(GRIT_LIBRARY NAMES grit PATHS "${_grit_lib}" NO_DEFAULT_PATH)
if(NOT GRIT_LIBRARY OR NOT EXISTS "${_grit_include}/grit.h")
  set(grit_FOUND FALSE)
  set(grit_NOT_FOUND_MESSAGE "libgrit was not built in ${_grit_lib} (no C compiler at install?)")
  return()
endif()
if(NOT TARGET grit::grit)
  add_library(grit::grit SHARED IMPORTED)
  set_target_properties(grit::grit PROPERTIES
    IMPORTED_LOCATION "${GRIT_LIBRARY}"
    IMPORTED_NO_SONAME FALSE
    INTERFACE_INCLUDE_DIRECTORIES "${_grit_include}")
endif()
set(GRIT_INCLUDE_DIR "${_grit_include}")
set(grit_FOUND TRUE)
