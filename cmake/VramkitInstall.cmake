# cmake --install: headers, the library and a CMake package, so that a downstream project can
# find_package(vramkit) and link vramkit::vramkit.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS vramkit EXPORT vramkitTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/vramkit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT vramkitTargets NAMESPACE vramkit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vramkit)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vramkitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/vramkitConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vramkit)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vramkitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vramkitConfig.cmake ${PROJECT_BINARY_DIR}/vramkitConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vramkit)
