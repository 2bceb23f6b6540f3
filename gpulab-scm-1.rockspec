-- gpulab as a LuaRocks rock. In the source folder, `luarocks --lua-version=5.4 make` builds with
-- CMake (the CUDA toolkit, liblua5.4-dev and libedit-dev, as README.md's build command installs)
-- and installs cuda.so into the tree's C module folder and gpulab.lab, gpulab.json, ... into its
-- Lua folder, so that the tree's lua5.4 finds `require "cuda"`; the kernels, labs and API
-- description go to the rock's own folder (<rock>/share/gpulab), where cuda.home finds them.
rockspec_format = "3.0"
package = "gpulab"
version = "scm-1"
source = {
  url = "git+file://.", -- `luarocks make` builds the folder it runs in
}
description = {
  summary = "CUDA driver API, NVRTC and Hopper TMA for Lua 5.4",
  detailed = [[
The cuda module (require "cuda") compiles CUDA C++ with NVRTC, loads modules, launches kernels
with checked arguments, validates and encodes TMA tensor maps, measures with a noise model and
profiles with CUPTI; gpulab.lab is the harness its labs are written against. libcuda and NVRTC are
opened at run time: without a GPU everything else works.]],
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    GPULAB_LUA_CMOD_DIR = "$(LIBDIR)",
    GPULAB_LUA_LMOD_DIR = "$(LUADIR)",
    LUA_INCLUDE_DIR = "$(LUA_INCDIR)",
  },
}
