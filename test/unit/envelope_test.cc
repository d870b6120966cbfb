#include <gtest/gtest.h>

#include <cstring>

#include "datatype/layout.h"
#include "protocol/envelope.h"

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

TEST(Envelope, DataTagsAvoidTheControlTagAndStayWithinTagUb) {
    const int tag_ub = 32767;
    for (std::uint64_t id : {0ull, 1ull, 32766ull, 32767ull, 32768ull, 1ull << 40}) {
        int t = data_tag(id, tag_ub);
        EXPECT_NE(t, kControlTag);
        EXPECT_GE(t, 1);
        EXPECT_LE(t, tag_ub);
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
