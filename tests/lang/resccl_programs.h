// ResCCLang programs shared by the front-end tests.
#pragma once

namespace tuccl::testing {

// ResCCL Appendix B, Figure 16: hierarchical-mesh AllReduce, 4 nodes x 8 GPUs.
inline constexpr const char* kHmAllReduce =
    R"(def ResCCLAlgo(nRanks=32, nChannels=4, nWarps=16, AlgoName="HM", OpType="Allreduce", GPUPerNode=8, NICPerNode=8):
    nGpusperNode = GPUPerNode
    nNodes = nRanks / nGpusperNode
    nChunks = nNodes * nGpusperNode
    for n in range(0, nNodes):
        for r in range(0, nGpusperNode):
            for baseStep in range(0, nNodes):
                for offset in range(0, nGpusperNode - 1):
                    srcRank = nGpusperNode * n + r
                    dstRank = (r + offset + 1) % nGpusperNode + nGpusperNode * n
                    step = baseStep * (nGpusperNode - 1) + offset
                    transfer(srcRank, dstRank, step, (dstRank % nGpusperNode + baseStep * nGpusperNode) % nChunks, rrc)
    for n in range(0, nNodes):
        for r in range(0, nGpusperNode):
            for baseStep in range(0, nNodes - 1):
                srcRank = nGpusperNode * n + r
                dstRank = (srcRank + nGpusperNode) % nChunks
                step = nNodes * (nGpusperNode - 1) + baseStep
                transfer(srcRank, dstRank, step, (srcRank + nChunks - baseStep * nGpusperNode) % nChunks, rrc)
    for n in range(0, nNodes):
        for r in range(0, nGpusperNode):
            for baseStep in range(0, nNodes - 1):
                srcRank = nGpusperNode * n + r
                dstRank = (srcRank + nGpusperNode) % nChunks
                step = nNodes * (nGpusperNode - 1) + nNodes - 1 + baseStep
                chunkId = (srcRank + nChunks - (baseStep + nNodes - 1) * nGpusperNode) % nChunks
                transfer(srcRank, dstRank, step, chunkId, recv)
    for n in range(0, nNodes):
        for r in range(0, nGpusperNode):
            for baseStep in range(0, nNodes):
                for offset in range(0, nGpusperNode - 1):
                    srcRank = nGpusperNode * n + r
                    dstRank = (r + offset + 1) % nGpusperNode + nGpusperNode * n
                    step = nNodes * (nGpusperNode - 1) + 2 * nNodes - 2 + baseStep
                    transfer(srcRank, dstRank, step, (srcRank + baseStep * nGpusperNode) % nChunks, recv)
)";

// A ring AllGather with the extensions: if/else, negative range step, keyword arguments.
inline constexpr const char* kRingAllGather =
    R"(def ResCCLAlgo(nRanks=8, OpType="Allgather", AlgoName="Ring", nChunks=8):
    # every rank forwards the chunk it received in the previous step
    for step in range(nRanks - 1):
        for r in range(nRanks):
            chunk = (r - step) % nRanks
            transfer(r, (r + 1) % nRanks, step, chunk, recv)
)";

// Every construct of the language in one program.
inline constexpr const char* kEverything =
    R"(ResCCLAlgo(nRanks=4, OpType="Allreduce", nChunks=4, nScratch=2,):
    total = 0
    for i in range(10, 0, -3): total = total + i   # 10 7 4 1
    if total == 22 and not total < 0:
        pass
    elif total > 100:
        total = -1
    else:
        total = 0
    x = (1 + \
         2) * 3 // 2 % 5
    for r in range(4):
        if r % 2 == 0 or r == 3:
            transfer(r, (r + 1) % 4, 0, r, "recv")
        else:
            transfer(r, (r + 1) % 4, 1, r, rrc, dstChunk=(r + 2) % 4)
    transfer(0, 0, 2, 0, recv, srcBuf="output", dstBuf=scratch, dstChunk=1)
    transfer(0, 1, 3, 0,
             recv, count=2)
)";

}  // namespace tuccl::testing
