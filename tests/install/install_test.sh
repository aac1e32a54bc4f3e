#!/usr/bin/env bash
# Installs the current build into a temporary prefix and shows that the prefix stands alone:
#   1. `cmake --install BUILD --prefix TMP/prefix`;
#   2. the installed headers are the curated API (cmake/TuCCLInstall.cmake): at most 40 files under
#      include/, each compiling alone from the prefix with a consumer's flags (-I<prefix>/include
#      -I<prefix>/include/tuccl, as TuCCL::options and tuccl.pc give), the C ones also as C;
#   3. no installed program, library or package file names the source or the build tree (debug
#      information aside: the check reads stripped copies);
#   4. with the source and build trees hidden (a private mount namespace lays an empty tmpfs over
#      them; where user namespaces are not allowed the trees stay, and 3. is the proof), in a
#      scrubbed environment from a temporary directory, run_installed.sh runs the installed tools
#      (tuccl-compile --check, --verify with a fresh host build, NVRTC, tuccl-sim, tuccl-tune on the
#      bundled programs, ...) and builds two consumers of the stages: find_package(TuCCL) and pkg-config tuccl-stages; and
#      the C example with pkg-config tuccl (libtuccl), run as two ranks.
# Everything lives in one temporary directory, removed on exit.
#
# usage: install_test.sh SOURCE_DIR BUILD_DIR CMAKE CXX GENERATOR MAKE_PROGRAM HAVE_CUDA
set -euo pipefail

source_dir=$(realpath "$1")
build_dir=$(realpath "$2")
cmake=$3 cxx=$4 generator=$5 make_program=$6 have_cuda=$7

# The temporary directory must stay visible when the trees are hidden.
tmp_root=$(realpath "${TMPDIR:-/tmp}")
case $tmp_root/ in "$source_dir"/* | "$build_dir"/*) tmp_root=/tmp ;; esac
tmp=$(mktemp -d "$tmp_root/tuccl-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
max_headers=40

echo "== install into $prefix"
"$cmake" --install "$build_dir" --prefix "$prefix" > "$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }
cp -r "$source_dir/tests/install/consumer" "$tmp/consumer"
cp "$source_dir/tests/install/run_installed.sh" "$tmp/run_installed.sh"

echo "== the installed headers: at most $max_headers, each compiling alone"
mapfile -d '' headers < <(find "$prefix/include" -type f -print0 | sort -z)
echo "${#headers[@]} files under include/"
if [ "${#headers[@]}" -gt "$max_headers" ]; then
  printf '  %s\n' "${headers[@]#"$prefix"/}" >&2
  echo "error: ${#headers[@]} files under include/, more than $max_headers: an installed header is API" \
    "(cmake/TuCCLInstall.cmake, TUCCL_INSTALLED_HEADERS)" >&2
  exit 1
fi
# Only the prefix on the include path: a header that needs one not installed fails here.
header_flags=(-fsyntax-only -I"$prefix/include" -I"$prefix/include/tuccl")
broken=0
for header in "${headers[@]}"; do
  name=${header#"$prefix"/include/}
  case $name in *.h) ;; *) echo "error: include/$name is not a header" >&2; broken=1; continue ;; esac
  "$cxx" -std=c++20 "${header_flags[@]}" -x c++ "$header" 2> "$tmp/header.log" ||
    { echo "error: include/$name does not compile alone as C++20:" >&2; cat "$tmp/header.log" >&2; broken=1; }
  # The C API and the plugin ABIs (include/tuccl/*.h, no stage folder) are C headers.
  if [[ $name != */*/* ]]; then
    cc -std=c11 "${header_flags[@]}" -x c "$header" 2> "$tmp/header.log" ||
      { echo "error: include/$name does not compile alone as C11:" >&2; cat "$tmp/header.log" >&2; broken=1; }
  fi
done
[ "$broken" -eq 0 ]

echo "== no source or build path in the installed files"
# Stripped copies: what a program can read at run time, without the debug information that
# records where it was compiled.
leaks=0
while IFS= read -r -d '' file; do
  copy=$tmp/stripped
  case $(head -c 7 "$file" | od -An -c | tr -d ' ') in
    177ELF*) strip -o "$copy" "$file" ;;
    '!<arch>') strip --strip-unneeded -o "$copy" "$file" ;;
    *) cp "$file" "$copy" ;;
  esac
  for tree in "$source_dir" "$build_dir"; do
    if grep -qaF "$tree" "$copy"; then
      echo "error: ${file#"$prefix"/} names $tree" >&2
      leaks=1
    fi
  done
done < <(find "$prefix/bin" "$prefix/lib" -type f -print0)
rm -f "$tmp/stripped"
[ "$leaks" -eq 0 ]

# The environment of the checks: nothing from ours but a plain PATH.
checks=(env -i "PATH=/usr/local/bin:/usr/bin:/bin" "HOME=$tmp" "TMPDIR=$tmp" "LANG=C"
        bash "$tmp/run_installed.sh" "$prefix" "$tmp/work" "$cmake" "$cxx" "$generator" "$make_program"
        "$have_cuda")
mkdir -p "$tmp/work"
cd "$tmp/work"
mkdir "$tmp/probe"
if unshare --user --map-root-user --mount mount -t tmpfs tuccl-probe "$tmp/probe" 2> /dev/null; then
  echo "== run from the prefix with $source_dir and $build_dir hidden"
  unshare --user --map-root-user --mount bash -c '
    set -euo pipefail
    mount -t tmpfs tuccl-hidden "$1"
    case $2/ in "$1"/*) ;; *) mount -t tmpfs tuccl-hidden "$2" ;; esac
    for tree in "$1" "$2"; do
      [ ! -e "$tree" ] || [ -z "$(ls -A "$tree")" ] || { echo "error: $tree is still visible" >&2; exit 1; }
    done
    shift 2
    exec "$@"' _ "$source_dir" "$build_dir" "${checks[@]}"
else
  echo "== run from the prefix (no user namespaces here: the trees stay visible)"
  "${checks[@]}"
fi
echo "== install test passed"
