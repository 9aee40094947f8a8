// gputrain_torch_pch builds the precompiled header (torch_pch.h); CMake needs a
// source file in the target to compile it with.
