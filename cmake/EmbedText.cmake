# Writes OUTPUT, a C++ file defining `extern const char SYMBOL[]` with the bytes of INPUT.
file(READ ${INPUT} content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${content}")
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\nnamespace tuccl {\nextern const char ${SYMBOL}[] = {${bytes} '\\0'};\n}\n")
