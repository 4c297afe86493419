# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Writes the vmlinux BTF blob of an uncompressed arm64 kernel Image (Debian's arm64 vmlinuz is one) to stdout.

The Image has no ELF sections: the .BTF blob is found by its header (magic 0xeB9F, version 1, 24-byte header,
types first, strings right after them), the first such header whose type section is larger than a MiB."""
import struct, sys
img = open(sys.argv[1], 'rb').read()
# BTF header: magic 0xeB9F, version 1, flags 0, hdr_len 24, then type_off, type_len, str_off, str_len.
i = img.find(b'\x9f\xeb\x01\x00\x18\x00\x00\x00')
while i >= 0:
    type_off, type_len, str_off, str_len = struct.unpack_from('<4I', img, i + 8)
    if type_off == 0 and str_off == type_len and type_len > 1 << 20:
        sys.stdout.buffer.write(img[i:i + 24 + str_off + str_len])
        break
    i = img.find(b'\x9f\xeb\x01\x00\x18\x00\x00\x00', i + 1)
else:
    sys.exit('no vmlinux BTF in ' + sys.argv[1])
