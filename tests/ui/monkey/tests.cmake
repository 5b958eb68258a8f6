# The monkey test (tests/ui/monkey): random input on the real window for a
# budget of seconds. ctest runs a short budget (label "monkey"); by hand:
#   tests/ui/monkey/run_monkey.sh build/DIR/tests/test_monkey 600 [SEED]
# Meant for an AddressSanitizer + UBSan build of the UI (README "Tests").
add_executable(test_monkey ${CMAKE_CURRENT_LIST_DIR}/monkey.cpp ${CMAKE_CURRENT_LIST_DIR}/monkey_log.cpp)
target_link_libraries(test_monkey PRIVATE ui Qt6::Test)
target_include_directories(test_monkey PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
set(PL_MONKEY_SECONDS 60 CACHE STRING "The monkey test's budget under ctest, in seconds")
set(PL_MONKEY_SEED 43 CACHE STRING "The monkey test's seed under ctest (empty: a new one each run, printed)")
add_test(NAME test_monkey
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/run_monkey.sh $<TARGET_FILE:test_monkey> ${PL_MONKEY_SECONDS} ${PL_MONKEY_SEED})
math(EXPR _pl_monkey_timeout "${PL_MONKEY_SECONDS} + 300")
set_tests_properties(test_monkey PROPERTIES LABELS monkey TIMEOUT ${_pl_monkey_timeout}
                     WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}
                     ENVIRONMENT "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan.supp:print_suppressions=0")
