# The API reference: Doxygen over the installed headers (cmake/PublicHeaders.cmake), into
# <build>/docs/api/html. `cmake --build build --target docs` builds it; the test
# api_reference_documents_every_name builds it with every warning an error.
find_package(Doxygen QUIET)
set(C10D_API_REFERENCE_DIR "${PROJECT_BINARY_DIR}/docs/api")
set(C10D_API_REFERENCE_HEADERS
  ${C10D_PUBLIC_HEADERS} ${C10D_PUBLIC_MPI_HEADERS} ${C10D_PUBLIC_NCCL_HEADERS})
list(TRANSFORM C10D_API_REFERENCE_HEADERS PREPEND "${PROJECT_SOURCE_DIR}/")
list(APPEND C10D_API_REFERENCE_HEADERS "${PROJECT_SOURCE_DIR}/docs/reference.md")
list(JOIN C10D_API_REFERENCE_HEADERS " \\\n    " C10D_API_REFERENCE_INPUT)
configure_file(docs/Doxyfile.in "${PROJECT_BINARY_DIR}/docs/Doxyfile" @ONLY)
if(DOXYGEN_FOUND)
  add_custom_target(docs
    # Doxygen opens WARN_LOGFILE, in that folder, before it makes the folder.
    COMMAND ${CMAKE_COMMAND} -E make_directory "${C10D_API_REFERENCE_DIR}"
    COMMAND Doxygen::doxygen "${PROJECT_BINARY_DIR}/docs/Doxyfile"
    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
    COMMENT "API reference: ${C10D_API_REFERENCE_DIR}/html/index.html"
    VERBATIM)
else()
  add_custom_target(docs
    COMMAND ${CMAKE_COMMAND} -E echo "docs: doxygen not found; run tools/setup.sh (Debian's doxygen)"
    COMMAND ${CMAKE_COMMAND} -E false
    VERBATIM)
endif()
