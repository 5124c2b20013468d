#include <immintrin.h>

#include <cstring>

#include "backends/cpu/amx_tile.h"

namespace deskside::backends::cpu {

namespace {

// The 64-byte tile configuration LDTILECFG reads (Intel SDM Vol. 1, 18.2): palette 1, then the
// bytes per row of each tile and its rows.
struct alignas(64) TileConfig {
    uint8_t palette_id;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);

}  // namespace

void amx_int8_tile_product(const int8_t* a, const int8_t* b_vnni, int32_t* c) {
    TileConfig cfg;
    std::memset(&cfg, 0, sizeof cfg);
    cfg.palette_id = 1;
    for (int t = 0; t < 3; ++t) {  // tile 0: c (16 x 16 int32), 1: a, 2: b (16 x 64 bytes each)
        cfg.colsb[t] = 64;
        cfg.rows[t] = kAmxRows;
    }
    _tile_loadconfig(&cfg);
    _tile_loadd(0, c, 64);
    _tile_loadd(1, a, 64);
    _tile_loadd(2, b_vnni, 64);
    _tile_dpbssd(0, 1, 2);
    _tile_stored(0, c, 64);
    _tile_release();
}

}  // namespace deskside::backends::cpu
