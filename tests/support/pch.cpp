// The translation unit that builds the tests' precompiled headers (cmake/pch.cmake).
