# cmake -DIN=<file> -DOUT=<file.c> -DNAME=<symbol> -P embed.cmake
# Writes a C file defining `const unsigned char NAME[]` with the bytes of IN
# and `const size_t NAME_len` (kinet's XDP program inside its module).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* Generated from ${IN} by cmake/embed.cmake. */\n#include <stddef.h>\n"
     "const unsigned char ${NAME}[] = {\n${body}\n};\n"
     "const size_t ${NAME}_len = ${bytes};\n")
