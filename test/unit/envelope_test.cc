#include <gtest/gtest.h>

#include <cstring>

#include "datatype/layout.h"
#include "protocol/envelope.h"
#include "util/node_identity.h"

using namespace mpiacc;

TEST(Envelope, HasTheFixedWireSizeAndIsNotAPowerOfTwo) {
    EXPECT_EQ(sizeof(Envelope), kEnvelopeBytes);
    EXPECT_NE(kEnvelopeBytes & (kEnvelopeBytes - 1), 0u);
    EXPECT_EQ(sizeof(IpcExport), 152u);
}

TEST(Envelope, IsRecognisedByLengthAndMagic) {
    Envelope e;
    std::memset(&e, 0, sizeof e);
    e.magic = kEnvelopeMagic;
    e.version = kProtocolVersion;
    EXPECT_TRUE(looks_like_envelope(&e, sizeof e));
    EXPECT_FALSE(looks_like_envelope(&e, sizeof e - 1));
    e.magic ^= 1;
    EXPECT_FALSE(looks_like_envelope(&e, sizeof e));
    e.magic = kEnvelopeMagic;
    e.version = kProtocolVersion + 1;
    EXPECT_FALSE(looks_like_envelope(&e, sizeof e));
}

// Tag 0 is the netmod's control channel: data tags start at 1.
TEST(Envelope, DataTagsAvoidTheControlTagAndStayWithinTagUb) {
    const int tag_ub = 32767;
    for (std::uint64_t id : {0ull, 1ull, 32766ull, 32767ull, 32768ull, 1ull << 40}) {
        int t = data_tag(id, tag_ub);
        EXPECT_GE(t, 1);
        EXPECT_LE(t, tag_ub);
    }
}

TEST(Envelope, BouncedPayloadCopyTakesExactlyItsBytesAtAnyAlignment) {
    // Every length a short receive's payload can have, from unaligned sources and
    // destinations: the overlapping moves must write the payload and nothing past it.
    unsigned char src[kEnvelopeBytes + 16], dst[kEnvelopeBytes + 32];
    for (std::size_t i = 0; i < sizeof src; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
    for (std::size_t off = 0; off < 8; off += 3) {
        for (std::size_t n = 0; n < kEnvelopeBytes; ++n) {
            std::memset(dst, 0xEE, sizeof dst);
            copy_bounced_payload(dst + 8 + off, src + off, n);
            ASSERT_EQ(std::memcmp(dst + 8 + off, src + off, n), 0) << "n " << n << " offset " << off;
            for (std::size_t i = 0; i < 8 + off; ++i) ASSERT_EQ(dst[i], 0xEE) << "before, n " << n;
            for (std::size_t i = 8 + off + n; i < sizeof dst; ++i) ASSERT_EQ(dst[i], 0xEE) << "after, n " << n;
        }
    }
}

TEST(Envelope, NodeIdIsStableWithinAHost) { EXPECT_EQ(local_node_id(), local_node_id()); }

TEST(Layout, BuiltinSizesComeFromTheHandle) {
    EXPECT_TRUE(is_builtin_type(MPI_DOUBLE));
    EXPECT_EQ(builtin_type_size(MPI_DOUBLE), sizeof(double));
    EXPECT_EQ(builtin_type_size(MPI_CHAR), 1u);
    EXPECT_EQ(builtin_type_size(MPI_INT), sizeof(int));
    EXPECT_EQ(packed_bytes(10, MPI_DOUBLE), 80);
}
